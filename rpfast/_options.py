"""Config dataclasses as command-line options: fields are declared once, with their help.

Every dataclass field becomes an option unless its metadata says ``cli=False``:

* the flag is ``--field-name`` (metadata ``flag`` overrides it; ``aliases`` adds hidden,
  deprecated spellings; ``positional=True`` makes it a positional argument, ``nargs``
  passes through, e.g. ``"?"`` for an optional one);
* the type comes from the annotation (``int``, ``float``, ``str``, ``Optional[...]``) or from
  metadata ``type`` (a parser such as :func:`int_range`); ``choices`` from metadata;
* a ``bool`` field is a switch: ``--flag`` sets it when its default is False, and
  ``--no-flag`` clears it when its default is True;
* a ``List[X]`` field takes one or more values (``nargs="+"``);
* a field without a default is a required option;
* the help text is metadata ``help``; the default is appended to it; ``metavar`` overrides
  the value's name in the usage line.

Range checks stay in the config's own ``validate()``, so the library and the command
line refuse the same values with the same message.
"""
import argparse
import dataclasses
import typing
from typing import Any, Callable, Type

INT64_MAX = (1 << 63) - 1

__all__ = ["add_dataclass_options", "config_from_args", "int_range", "option"]


def option(default: Any = dataclasses.MISSING, help: str = "", **metadata) -> Any:  # noqa: A002 - argparse's word
    """A dataclass field with command-line metadata (``help``, ``flag``, ``type``, ...)."""
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


def int_range(minimum: int, maximum: int = INT64_MAX) -> Callable[[str], int]:
    """argparse ``type=``: an integer in [minimum, maximum] (default maximum: 2^63 - 1)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def _base_type(annotation):
    """``Optional[X]`` -> X; anything else unchanged."""
    if typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _cli_fields(config_cls):
    return [f for f in dataclasses.fields(config_cls) if f.metadata.get("cli", True)]


def add_dataclass_options(parser: argparse.ArgumentParser, config_cls: Type) -> None:
    """Add one option per field of ``config_cls`` (see the module docstring)."""
    hints = typing.get_type_hints(config_cls)
    for field in _cli_fields(config_cls):
        meta = field.metadata
        kind = _base_type(hints[field.name])
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        default = None if required else (field.default if field.default is not dataclasses.MISSING
                                         else field.default_factory())
        help_text = meta.get("help", "")
        kwargs: dict = {}
        if typing.get_origin(kind) is list:
            kind = typing.get_args(kind)[0]
            kwargs["nargs"] = "+"
        if kind is bool:
            kwargs["action"] = "store_false" if default else "store_true"
            flag = meta.get("flag", f"--{'no-' if default else ''}{field.name.replace('_', '-')}")
        else:
            kwargs["type"] = meta.get("type", kind)
            if "choices" in meta:
                kwargs["choices"] = list(meta["choices"])
            flag = meta.get("flag", f"--{field.name.replace('_', '-')}")
            kwargs["metavar"] = meta.get("metavar", flag.lstrip("-").replace("-", "_").upper())
            if not required and default is not None:
                help_text += f" (default {default})"
        if "nargs" in meta:
            kwargs["nargs"] = meta["nargs"]
        if meta.get("positional"):
            kwargs.pop("metavar", None)
            parser.add_argument(field.name, help=help_text, **kwargs)
            continue
        if required:
            kwargs["required"] = True
        else:
            kwargs["default"] = default
        parser.add_argument(flag, dest=field.name, help=help_text, **kwargs)
        for alias in meta.get("aliases", ()):
            hidden = {k: v for k, v in kwargs.items() if k not in ("required", "default")}
            parser.add_argument(alias, dest=field.name, help=argparse.SUPPRESS, default=argparse.SUPPRESS, **hidden)


def config_from_args(config_cls: Type, args: argparse.Namespace, preset=None, **overrides):
    """Build ``config_cls`` from parsed ``args`` (its fields only), then apply ``overrides``.
    ``preset`` (a ``--paper``-style protocol, field name -> value) sets the fields the command
    line left at their defaults: an option given beside the preset with another value wins over
    it (one given with its default value cannot be told from one not given)."""
    fields = _cli_fields(config_cls)
    values = {f.name: getattr(args, f.name) for f in fields if hasattr(args, f.name)}
    defaults = {f.name: f.default for f in fields}
    for name, value in (preset or {}).items():
        if name not in defaults:
            raise TypeError(f"{config_cls.__name__} has no option {name!r} to preset")
        if values.get(name, defaults[name]) == defaults[name]:
            values[name] = value
    values.update(overrides)
    return config_cls(**values)
