package kafka.server;

/** Test fixture: a request-handler loop that needs a lock the stalled path holds (frames read
 * "kafka.server.KafkaRequestHandler.run", as in a real broker; the analysis knows handlers by that frame). */
public class KafkaRequestHandler implements Runnable {
    private final Object requestLock;

    public KafkaRequestHandler(Object requestLock) { this.requestLock = requestLock; }

    @Override
    public void run() {
        synchronized (requestLock) {
            System.out.println("unreachable: handler got the lock");
        }
    }
}
