"""The one truthiness rule (``kafka_runbooks/truth.py``): strict, and an unknown word is an error, never quietly a
yes or a no. Before it, two helpers disagreed: the operators' read ``"execute"`` as yes and ``"on"`` or a typo as
no; the SSH hook's read ``"on"`` as yes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafka_runbooks.truth import truthy


@pytest.mark.parametrize("value", [True, "true", "True", " TRUE ", "1", 1, "yes"])
def test_yes(value):
    assert truthy(value) is True


@pytest.mark.parametrize("value", [False, None, "false", "False", "0", 0, "no", "", "None"])
def test_no(value):
    assert truthy(value) is False


@pytest.mark.parametrize("value", ["execute", "on", "off", "ture", "y", "2", "dry-run"])
def test_an_unknown_word_is_an_error(value):
    with pytest.raises(ValueError, match="not a yes/no value"):
        truthy(value)


def test_the_services_read_switches_by_the_one_rule():
    """The form's switches (canary, resume) are read by the services (runbook/), the approval's canary is the one
    recorded with the plan: all by the one rule."""
    from kafka_runbooks.runbook import election, restart

    assert restart.truthy is truthy and election.truthy is truthy
    config = SimpleNamespace(canary=SimpleNamespace(enabled=False))
    with pytest.raises(ValueError):
        restart.canary_of(restart.Request(kind=restart.ROLLING_RESTART, canary="execute"), config)  # the old helper said yes


@pytest.mark.parametrize("value", ["on", "enabled", "ture"])
def test_the_ssh_hook_refuses_a_host_key_switch_it_cannot_read(value):
    """Fail closed: a word the rule does not know counts as set, so the insecure connection is refused."""
    from kafka_runbooks.hooks.ssh import InsecureConnectionError, _check_extras

    with pytest.raises(InsecureConnectionError, match="no_host_key_check"):
        _check_extras("c", {"no_host_key_check": value})
    _check_extras("c", {"no_host_key_check": "false"})
