"""Triggers: event-driven starts of the runbooks."""
