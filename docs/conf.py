"""Sphinx configuration of rpfast's documentation: the guide and experiment pages (Markdown,
read by MyST) and the API reference, generated from the docstrings (autodoc; Google-style
``Args:`` sections through napoleon).

Build it (warnings are errors; CI builds it in tests/project/test_docs.py)::

    pip install torch==2.13.0 -e ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""
import rpfast

project = "rpfast"
release = version = rpfast.__version__
author = "the rpfast authors"
copyright = "the rpfast authors"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "experiments/results"]
root_doc = "index"

autodoc_member_order = "bysource"
autodoc_default_options = {}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True  # show `generator=None`, not the evaluated object
napoleon_google_docstring = True
napoleon_numpy_docstring = False
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]
suppress_warnings = ["myst.header"]

html_theme = "alabaster"
html_title = f"rpfast {release}"
html_static_path = []
