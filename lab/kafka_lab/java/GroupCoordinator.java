package kafka.coordinator;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import kafka.utils.Logger;

public final class GroupCoordinator {
    private static final String LOG = "kafka.coordinator.GroupCoordinator";
    public static final short NONE = 0;
    private final int brokerId;
    public final ConcurrentHashMap<String, GroupMetadata> groups = new ConcurrentHashMap<>();
    public final GroupMetadataManager groupManager;
    private final ScheduledExecutorService heartbeatExecutor;
    private final long sessionTimeoutMs = 30000;

    public GroupCoordinator(int brokerId, GroupMetadataManager groupManager) {
        this.brokerId = brokerId;
        this.groupManager = groupManager;
        // the Heartbeat purgatory's expiration executor, named like Kafka's "executor-Heartbeat"
        this.heartbeatExecutor = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "executor-Heartbeat");
            t.setDaemon(true);
            return t;
        });
        heartbeatExecutor.submit(() -> { });
    }

    public GroupMetadata group(String groupId) {
        return groups.computeIfAbsent(groupId, GroupMetadata::new);
    }

    public void startup() {
        Logger.info(LOG, "[GroupCoordinator " + brokerId + "]: Starting up.");
        heartbeatExecutor.scheduleWithFixedDelay(() -> {
            for (GroupMetadata g : groups.values()) new DelayedHeartbeat(this, g).run();
        }, 200, 200, TimeUnit.MILLISECONDS);
        Logger.info(LOG, "[GroupCoordinator " + brokerId + "]: Startup complete.");
    }

    public short handleHeartbeat(String groupId, String memberId, int generationId) {
        GroupMetadata group = group(groupId);
        synchronized (group) {
            group.memberLastHeartbeatMs.put(memberId, System.currentTimeMillis());
            return NONE;
        }
    }

    public void onExpireHeartbeat(GroupMetadata group, String memberId, long heartbeatDeadline) {
        synchronized (group) {
            group.memberLastHeartbeatMs.entrySet().removeIf(e -> e.getValue() + sessionTimeoutMs < System.currentTimeMillis());
        }
    }

    public void shutdown() {
        Logger.info(LOG, "[GroupCoordinator " + brokerId + "]: Shutting down.");
        heartbeatExecutor.shutdownNow();
        Logger.info(LOG, "[GroupCoordinator " + brokerId + "]: Shutdown complete.");
    }
}

final class DelayedHeartbeat implements Runnable {
    private final GroupCoordinator coordinator;
    private final GroupMetadata group;

    DelayedHeartbeat(GroupCoordinator coordinator, GroupMetadata group) { this.coordinator = coordinator; this.group = group; }

    public void run() { onExpiration(); }

    void onExpiration() { coordinator.onExpireHeartbeat(group, "", System.currentTimeMillis()); }
}
