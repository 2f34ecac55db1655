"""Hand-built ClusterSnapshots for the pure tests (detectors, safety, planner)."""

from kafka_runbooks.model import Broker, ClusterSnapshot, Partition


def P(topic, index, replicas, leader, isr, min_isr=None, unclean=None):
    return Partition(topic, index, tuple(replicas), leader, tuple(isr), min_insync_replicas=min_isr, unclean_leader_election=unclean)


def snap(partitions, brokers=(1, 2, 3), controller=1, probes=(), unparsable=(), **extra):
    """``extra``: any other ClusterSnapshot field (controller_epoch, reassigning, broker_configs, ...)."""
    return ClusterSnapshot(
        cluster="c1",
        taken_at="2024-01-01T00:00:00Z",
        brokers=tuple(Broker(b, f"kafka{b}", 9092) for b in brokers),
        controller_id=controller,
        partitions=tuple(partitions),
        probes=tuple(probes),
        unparsable=tuple(unparsable),
        **extra,
    )
