"""Property tests of the safety rules (hypothesis): on random topologies and cluster states --
replication factors 1-5, arbitrary ISRs, dead and not-serving brokers, min ISR from every source,
unclean election on and off -- no allowed stop ever

* stops the last live in-sync replica (except the not-serving waiver: direct evidence, RF > 1,
  no unclean election possible),
* takes a partition below min.insync.replicas (a stop of a broker that does not serve takes no serving holder away),
* leaves an internal-topic partition (__consumer_offsets, __transaction_state) that had a serving
  in-sync holder without one,
* counts as a holder a broker that is registered and in the ISR but does not serve (incidents 000/001:
  the engine must find it by checking every holder directly; a holder that does not answer is no holder),
* decides with min.insync.replicas unknown (a replica's server.properties unread),

and a simulated roll that checks each stop on the state as it is then -- with brokers dying and
ISRs shrinking between steps -- never reaches such a state. The oracles below are written from
the rules' text, not from the implementation's helpers.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import INTERNAL_TOPICS, Broker, ClusterSnapshot, Partition
from kafka_runbooks.remediate.plan import plan_restart
from kafka_runbooks.remediate.safety import SafetySettings, holders_to_check, stop_refusals

TOPICS = ("__consumer_offsets", "__transaction_state", "orders", "events")
VERSIONS = (None, "0.10.1.0", "0.11.0.0", "2.3.0")


@st.composite
def cluster_states(draw):
    n = draw(st.integers(1, 6))
    ids = list(range(1, n + 1))
    live = draw(st.sets(st.sampled_from(ids)))
    controller = draw(st.one_of(st.none(), st.sampled_from(ids)))
    partitions = []
    for topic in draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True)):
        for index in range(draw(st.integers(1, 4))):
            rf = draw(st.integers(1, min(5, n)))
            replicas = draw(st.permutations(ids))[:rf]
            mask = draw(st.integers(1, 2**rf - 1))
            isr = [r for i, r in enumerate(replicas) if mask >> i & 1]
            leader = draw(st.sampled_from(isr + [-1]))
            # one draw for both overrides: min ISR None or 1..rf+1, unclean None/True/False
            code = draw(st.integers(0, (rf + 2) * 3 - 1))
            partitions.append(
                Partition(
                    topic, index, tuple(replicas), leader, tuple(isr),
                    min_insync_replicas=(code // 3) or None,
                    unclean_leader_election=(None, True, False)[code % 3],
                )
            )
    dynamic = {}
    if draw(st.booleans()):
        dynamic["min.insync.replicas"] = str(draw(st.integers(1, 4)))
    if draw(st.booleans()):
        dynamic["unclean.leader.election.enable"] = draw(st.sampled_from(["true", "false"]))
    configs = {"<default>": dynamic} if dynamic else {}
    for b in draw(st.sets(st.sampled_from(ids), max_size=2)):  # per-broker dynamic overrides (/config/brokers/<id>)
        configs[str(b)] = {"min.insync.replicas": str(draw(st.integers(1, 4)))}
    static = {
        b: {"min.insync.replicas": str(draw(st.integers(1, 4)))} for b in draw(st.sets(st.sampled_from(ids)))
    }
    unread = {b: "ssh failed" for b in draw(st.sets(st.sampled_from(ids), max_size=2)) if b not in static}
    snapshot = ClusterSnapshot(
        cluster="c1",
        taken_at="2024-01-01T00:00:00Z",
        brokers=tuple(Broker(b, f"kafka{b}", 9092) for b in sorted(live)),
        controller_id=controller,
        partitions=tuple(partitions),
        broker_configs=configs,
    )
    safety = SafetySettings(
        min_isr=draw(st.one_of(st.none(), st.integers(1, 3))),
        unclean=draw(st.one_of(st.none(), st.booleans())),
        kafka_version=draw(st.sampled_from(VERSIONS)),
        static_configs=static,
        unread=unread,
    )
    not_serving = {b: "direct check failed and jvm_deadlock" for b in draw(st.sets(st.sampled_from(sorted(live) or ids)))}
    # registered, in every ISR, serving nothing -- and nobody told the engine: it must find them itself
    hung = draw(st.sets(st.sampled_from(sorted(live) or ids)))
    return snapshot, safety, not_serving, hung


# ---------------------------------------------------------------- oracles, from the rules' text

def _replica(key: str, r: int, s: ClusterSnapshot, safety: SafetySettings):
    """A replica's broker-level value: its own dynamic override, the dynamic default, its server.properties;
    "unknown" when that file could not be read; None when nothing sets it."""
    for value in (s.broker_configs.get(str(r), {}).get(key), s.broker_configs.get("<default>", {}).get(key),
                  safety.static_configs.get(r, {}).get(key)):
        if value is not None:
            return value
    return "unknown" if r in safety.unread else None


def oracle_min_isr(p: Partition, s: ClusterSnapshot, safety: SafetySettings) -> int | None:
    """None: unknown (some replica's configuration could not be read)."""
    if p.min_insync_replicas is not None:
        return p.min_insync_replicas
    default = safety.min_isr if safety.min_isr is not None else 1
    values = [_replica("min.insync.replicas", r, s, safety) for r in p.replicas]
    if "unknown" in values:
        return None
    return max(int(v) if v is not None else default for v in values)


def oracle_unclean(p: Partition, s: ClusterSnapshot, safety: SafetySettings) -> bool:
    if p.unclean_leader_election is not None:
        return p.unclean_leader_election
    default = safety.unclean if safety.unclean is not None else safety.kafka_version in (None, "0.10.1.0")
    values = [_replica("unclean.leader.election.enable", r, s, safety) for r in p.replicas]
    return any(v in ("true", "unknown") or (v is None and default) for v in values)


def violations(s: ClusterSnapshot, b: int, safety: SafetySettings, not_serving: dict[int, str], hung=frozenset()) -> list[str]:
    """What is wrong with stopping ``b`` in state ``s`` (empty: the stop keeps every promise). ``hung``: brokers
    registered and in ISRs that serve nothing (whatever the engine was told)."""
    live = s.live_broker_ids
    out = []
    for p in s.partitions:
        live_isr = [r for r in p.isr if r in live]
        after = [r for r in live_isr if r != b]
        serving_before = [r for r in live_isr if r not in not_serving and r not in hung]
        serving_after = [r for r in serving_before if r != b]
        if b in live_isr:
            if not after:
                waived = b in not_serving and len(p.replicas) > 1
                unclean_risk = oracle_unclean(p, s, safety) and any(r in live and r not in p.isr for r in p.replicas if r != b)
                if not waived or unclean_risk:
                    out.append(f"{p.name}: stopped its last live in-sync replica {b}")
            else:
                needed = oracle_min_isr(p, s, safety)
                if not serving_after:
                    out.append(f"{p.name}: left only in-sync replicas that do not serve {after}")
                elif b not in serving_before:
                    pass  # b serves nothing: its stop leaves every serving holder there is (no less writable than now)
                elif needed is None:
                    out.append(f"{p.name}: stopped with min.insync.replicas unknown")
                elif len(serving_after) < needed:
                    out.append(f"{p.name}: below min ISR counting only replicas that serve ({serving_after} < {needed})")
        if p.topic in INTERNAL_TOPICS and serving_before and not serving_after:
            out.append(f"{p.name}: every serving in-sync holder down")
        missing = set(p.replicas) - set(p.isr) - {b}
        if missing and not (b in p.replicas and b in not_serving):
            out.append(f"{p.name}: stopped {b} while under-replicated")
    return out


def engine_refusals(s: ClusterSnapshot, b: int, safety: SafetySettings, not_serving: dict[int, str], hung) -> list[str]:
    """The executor's decision: it checks every holder ``holders_to_check`` names directly (a hung broker does not
    answer), then applies the rules. The oracle above, not this, decides what is right."""
    unresponsive = {r: "did not answer a direct check" for r in holders_to_check(s, b) if r in hung}
    return stop_refusals(s, b, safety, not_serving, unresponsive)


# issue 6: at least 10,000 random topologies and cluster states. HYPOTHESIS_MAX_EXAMPLES for a longer hunt, on fresh
# random seeds; otherwise the same examples every run (a CI run once failed inside Hypothesis's own replay with
# FlakyStrategyDefinition, not reproduced on three other seeds: a result must not depend on the draw of the day)
HUNT = "HYPOTHESIS_MAX_EXAMPLES" in os.environ
CI_SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=not HUNT)


# issue 17 §1's own example, run every time whatever the random draws: brokers {1,2}, __consumer_offsets-0 ISR [2,1],
# broker 1 registered and in the ISR but hung -- stopping broker 2 leaves no serving holder (incident 002)
ISSUE_17 = (ClusterSnapshot(cluster="c1", taken_at="2024-01-01T00:00:00Z", brokers=(Broker(1, "kafka1", 9092), Broker(2, "kafka2", 9092)),
                            controller_id=1, partitions=(Partition("__consumer_offsets", 0, (2, 1), 2, (2, 1)),)),
            SafetySettings(kafka_version="2.3.0"), {}, {1})


def test_the_oracle_catches_an_engine_blind_to_a_hung_holder():
    """The oracle is not the engine: on the issue's example an engine that trusts ZooKeeper's view (no direct check of
    the holders) allows stopping broker 2, and the oracle calls that a broken promise; the engine refuses it."""
    snapshot, safety, not_serving, hung = ISSUE_17
    assert stop_refusals(snapshot, 2, safety, not_serving) == []  # blind: registered and in the ISR looks like a holder
    assert violations(snapshot, 2, safety, not_serving, hung) == ["__consumer_offsets-0: left only in-sync replicas that do not serve [1]",
                                                                  "__consumer_offsets-0: every serving in-sync holder down"]
    assert engine_refusals(snapshot, 2, safety, not_serving, hung)


# CPU-bound: 2.5-3.5 min on an idle machine, past pytest's 600 s when the CI's other lanes load the machine (load 17)
@pytest.mark.timeout(1800)
@settings(max_examples=int(os.environ.get("HYPOTHESIS_MAX_EXAMPLES", 10_000)), **CI_SETTINGS)
@given(cluster_states())
@example(ISSUE_17)
def test_no_allowed_stop_breaks_a_promise(state):
    snapshot, safety, not_serving, hung = state
    for b in sorted({r for p in snapshot.partitions for r in p.replicas} | snapshot.live_broker_ids):
        refusals = engine_refusals(snapshot, b, safety, not_serving, hung)
        assert all(isinstance(r, str) and r for r in refusals)
        if not refusals:
            assert violations(snapshot, b, safety, not_serving, hung) == [], (b, snapshot, not_serving, hung)
        # without direct evidence nobody is ever the waived last replica
        if not engine_refusals(snapshot, b, safety, {}, hung):
            assert violations(snapshot, b, safety, {}, hung) == []


# ---------------------------------------------------------------- a simulated roll

def _stop(s: ClusterSnapshot, b: int) -> ClusterSnapshot:
    """Kafka's reaction to broker b leaving: out of every ISR (the last member stays, leaderless)."""

    def leave(p: Partition) -> Partition:
        if b not in p.isr:
            return p
        isr = tuple(r for r in p.isr if r != b)
        if not isr:
            return dataclasses.replace(p, leader=-1)
        return dataclasses.replace(p, isr=isr, leader=isr[0] if p.leader == b else p.leader)

    return dataclasses.replace(s, brokers=tuple(x for x in s.brokers if x.id != b), partitions=tuple(leave(p) for p in s.partitions))


def _start(s: ClusterSnapshot, b: int) -> ClusterSnapshot:
    def back(p: Partition) -> Partition:
        if b not in p.replicas:
            return p
        isr = tuple(r for r in p.replicas if r in p.isr or r == b)
        return dataclasses.replace(p, isr=isr, leader=p.leader if p.leader >= 0 else b)

    brokers = s.brokers if s.broker(b) else tuple(sorted(s.brokers + (Broker(b, f"kafka{b}", 9092),), key=lambda x: x.id))
    return dataclasses.replace(s, brokers=brokers, partitions=tuple(back(p) for p in s.partitions))


@pytest.mark.timeout(1800)
@settings(max_examples=2_000, **CI_SETTINGS)
@given(cluster_states(), st.data())
def test_simulated_roll_checked_on_fresh_state_never_breaks_a_promise(state, data):
    snapshot, safety, not_serving, hung = state
    ids = sorted({r for p in snapshot.partitions for r in p.replicas} | snapshot.live_broker_ids)
    config = ClusterConfig(name="c1", zk_conn_id="zk", hosts={b: f"h{b}" for b in ids})
    requested = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
    silent = {r: "did not answer a direct check" for b in requested for r in holders_to_check(snapshot, b) if r in hung}
    plan = plan_restart(snapshot, requested, config, not_serving=not_serving, settings=safety, unresponsive=silent)
    assert sorted(plan.broker_order) == sorted(requested)
    # the plan lists each step's refusals it carries, then how many more the state database keeps (plan.py)
    assert [r for r in plan.refusals if " more reason(s) not to stop it (" not in r] == [
        f"broker {s.broker_id}: {r}" for s in plan.steps for r in s.refusals]
    assert len(plan.refusals) - len([r for s in plan.steps for r in s.refusals]) == len([s for s in plan.steps if s.refusal_count])
    assert all(len(plan.detail.refusals.get(s.broker_id, ())) == (s.refusal_count or len(s.refusals)) for s in plan.steps)
    world, stuck, hung = snapshot, dict(not_serving), set(hung)
    for step in plan.steps:
        # between steps the world moves on: a broker may die, an ISR may shrink
        if data.draw(st.booleans()):
            world = _stop(world, data.draw(st.sampled_from(ids)))
        if data.draw(st.booleans()) and world.partitions:
            i = data.draw(st.integers(0, len(world.partitions) - 1))
            p = world.partitions[i]
            if len(p.isr) > 1:
                shrunk = dataclasses.replace(p, isr=p.isr[:-1], leader=p.isr[0])
                world = dataclasses.replace(world, partitions=world.partitions[:i] + (shrunk,) + world.partitions[i + 1:])
        if data.draw(st.booleans()) and world.brokers:  # a broker hangs between steps, nobody says so
            hung.add(data.draw(st.sampled_from([x.id for x in world.brokers])))
        if engine_refusals(world, step.broker_id, safety, stuck, hung):
            break  # the executor halts here
        assert violations(world, step.broker_id, safety, stuck, hung) == []
        world = _start(_stop(world, step.broker_id), step.broker_id)
        stuck.pop(step.broker_id, None)
        hung.discard(step.broker_id)  # restarted: it serves again

