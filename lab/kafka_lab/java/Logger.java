package kafka.utils;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.text.SimpleDateFormat;
import java.util.Date;

/** log4j-1.2 style "[%d] %p %m (%c)%n" writer (Kafka's default server.log / controller.log layout). */
public final class Logger {
    private static OutputStream server;
    private static OutputStream controller;
    private static final SimpleDateFormat FMT = new SimpleDateFormat("yyyy-MM-dd HH:mm:ss,SSS");

    private Logger() {}

    public static synchronized void init(String logDir) throws IOException {
        server = new FileOutputStream(logDir + "/server.log", true);
        controller = new FileOutputStream(logDir + "/controller.log", true);
    }

    private static synchronized void write(OutputStream out, String level, String msg, String logger, String[] extra) {
        StringBuilder sb = new StringBuilder();
        sb.append('[').append(FMT.format(new Date())).append("] ").append(level).append(' ')
          .append(msg).append(" (").append(logger).append(")\n");
        if (extra != null) for (String line : extra) sb.append(line).append('\n');
        try {
            OutputStream o = out != null ? out : System.out;
            o.write(sb.toString().getBytes(StandardCharsets.UTF_8));
            o.flush();
        } catch (IOException ignored) {
        }
    }

    public static void info(String logger, String msg) { write(server, "INFO", msg, logger, null); }
    public static void warn(String logger, String msg) { write(server, "WARN", msg, logger, null); }
    public static void warn(String logger, String msg, String... lines) { write(server, "WARN", msg, logger, lines); }
    public static void error(String logger, String msg, String... lines) { write(server, "ERROR", msg, logger, lines); }
    public static void fatal(String logger, String msg, String... lines) { write(server, "FATAL", msg, logger, lines); }
    public static void controllerInfo(String logger, String msg) { write(controller, "INFO", msg, logger, null); }
}
