package kafka.coordinator;

import java.util.HashMap;
import java.util.Map;

/** Group state; its own monitor guards it (as in Kafka 0.10.1: group synchronized { ... }). */
public final class GroupMetadata {
    public final String groupId;
    public final Map<String, Long> memberLastHeartbeatMs = new HashMap<>();
    public int generationId = 1;

    public GroupMetadata(String groupId) { this.groupId = groupId; }

    @Override
    public String toString() { return "[" + groupId + ",Stable]"; }
}
