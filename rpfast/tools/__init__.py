"""Standalone utilities behind ``rpfast`` subcommands (graph readers, subset enumeration)."""
