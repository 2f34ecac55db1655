package kafka.coordinator;

import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import kafka.cluster.Partition;
import kafka.server.LabFaultInjector;
import kafka.server.ReplicaManager;
import kafka.utils.Logger;

public final class GroupMetadataManager {
    private static final String LOG = "kafka.coordinator.GroupMetadataManager";
    private final int brokerId;
    private final ScheduledExecutorService scheduler;
    private ReplicaManager replicaManager;
    private GroupCoordinator coordinator;
    private final long retentionCheckIntervalMs;

    public GroupMetadataManager(int brokerId, long retentionCheckIntervalMs) {
        this.brokerId = brokerId;
        this.retentionCheckIntervalMs = retentionCheckIntervalMs;
        this.scheduler = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "group-metadata-manager-0");
            t.setDaemon(true);
            return t;
        });
    }

    public void startup(ReplicaManager replicaManager, GroupCoordinator coordinator) {
        this.replicaManager = replicaManager;
        this.coordinator = coordinator;
        scheduler.scheduleAtFixedRate(this::cleanupGroupMetadata, retentionCheckIntervalMs, retentionCheckIntervalMs, TimeUnit.MILLISECONDS);
    }

    public void loadGroupsForPartition(String topic, int partition) {
        scheduler.submit(() -> {
            long start = System.currentTimeMillis();
            Logger.info(LOG, "[Group Metadata Manager on Broker " + brokerId + "]: Loading offsets and group metadata from [" + topic + "," + partition + "]");
            Logger.info(LOG, "[Group Metadata Manager on Broker " + brokerId + "]: Finished loading offsets from [" + topic + "," + partition + "] in "
                    + (System.currentTimeMillis() - start) + " milliseconds.");
        });
    }

    public void removeGroupsForPartition(String topic, int partition) {
        scheduler.submit(() -> {
            Logger.info(LOG, "[Group Metadata Manager on Broker " + brokerId + "]: Unloading offsets and group metadata from [" + topic + "," + partition + "]");
            Logger.info(LOG, "[Group Metadata Manager on Broker " + brokerId + "]: Finished unloading [" + topic + "," + partition + "]. Removed 0 cached offsets and 0 cached groups.");
        });
    }

    /** Offset commit: the append waits in the produce purgatory (acks=-1) and completes through putCacheCallback. */
    public void prepareStoreOffsets(GroupMetadata group, String purgatoryKey) {
        replicaManager.appendMessages(purgatoryKey, () -> putCacheCallback(group));
    }

    void putCacheCallback(GroupMetadata group) {
        synchronized (group) {
            group.generationId = group.generationId;
        }
    }

    void cleanupGroupMetadata() {
        try {
            if (LabFaultInjector.deadlockArmed) LabFaultInjector.awaitPurgatoryHeld();
            for (GroupMetadata group : coordinator.groups.values()) {
                synchronized (group) {
                    String key = LabFaultInjector.purgatoryKey;
                    if (LabFaultInjector.deadlockArmed && key != null) {
                        // expired offsets found: append tombstones to the group's __consumer_offsets partition
                        LabFaultInjector.groupLocked();
                        Partition p = replicaManager.getPartition(key);
                        if (p != null) p.appendMessagesToLeader(replicaManager);
                    }
                }
            }
        } catch (Throwable t) {
            Logger.error(LOG, "Uncaught exception in scheduled task 'delete-expired-consumer-offsets'", t.toString());
        }
    }

    public void shutdown() { scheduler.shutdownNow(); }
}
