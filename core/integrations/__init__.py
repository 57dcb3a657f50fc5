"""Integrations with other training engines, each imported only when used (`core.integrations.trl` needs
`trl`); nothing in the library imports them except the command that selects that engine."""
