package kafka.server;

/**
 * Lab fault injection (not part of Kafka). Reproduces the KAFKA-3994/KAFKA-4399 lock-order race of incident 001
 * deterministically: kafka-request-handler-3 completes a DelayedProduce for an offset commit while holding the
 * purgatory's LinkedList monitor and then needs the GroupMetadata monitor; group-metadata-manager-0 holds the
 * GroupMetadata monitor (cleanupGroupMetadata) and then needs the LinkedList monitor. The two flags below only
 * order the two threads so that the race is always lost; the resulting deadlock is a real Java monitor deadlock.
 */
public final class LabFaultInjector {
    public static volatile boolean deadlockArmed;
    public static volatile String handlerThread = "kafka-request-handler-3";
    public static volatile String purgatoryKey;
    private static volatile boolean purgatoryHeld;
    private static volatile boolean groupHeld;

    private LabFaultInjector() {}

    public static void purgatoryLockedAwaitGroup() {
        purgatoryHeld = true;
        while (!groupHeld) pause();
    }

    public static void awaitPurgatoryHeld() {
        while (!purgatoryHeld) pause();
    }

    public static void groupLocked() { groupHeld = true; }

    private static void pause() {
        try { Thread.sleep(1); } catch (InterruptedException e) { Thread.currentThread().interrupt(); throw new RuntimeException(e); }
    }
}
