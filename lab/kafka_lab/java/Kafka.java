package kafka;

import java.io.FileInputStream;
import java.util.Properties;

import kafka.server.KafkaServer;
import kafka.utils.Logger;

/** Entry point, like Kafka's own: `java ... kafka.Kafka server.properties`. SIGUSR1 is the lab's fault trigger. */
public final class Kafka {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) { props.load(in); }
        KafkaServer server = new KafkaServer(props);
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdown, "kafka-shutdown-hook"));
        sun.misc.Signal.handle(new sun.misc.Signal("USR1"), sig -> server.injectDeadlock());
        try {
            server.startup();
        } catch (Throwable t) {
            Logger.fatal("kafka.server.KafkaServer", "Fatal error during KafkaServer startup. Prepare to shutdown", t.getClass().getName() + ": " + t.getMessage());
            System.exit(1);
        }
        server.awaitShutdown();
        System.exit(0);
    }
}
