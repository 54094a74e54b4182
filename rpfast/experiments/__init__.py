"""The paper's experiments as functions behind the ``rpfast`` command."""
