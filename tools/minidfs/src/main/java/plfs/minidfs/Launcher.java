package plfs.minidfs;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.server.datanode.DataNode;

/**
 * Runs a MiniDFSCluster on loopback for plfs's tests and benchmarks.
 *
 * <p>Usage: {@code Launcher STATE_DIR}. The cluster keeps its blocks under
 * {@code STATE_DIR/data}. Once every DataNode is up it writes, each
 * atomically (write a temporary, then rename):
 * <ul>
 *   <li>{@code STATE_DIR/datanodes.txt}: one line per DataNode,
 *       {@code INDEX http://127.0.0.1:PORT BEAN}: its HTTP server and the
 *       name of its activity MBean ({@code Hadoop:service=DataNode,
 *       name=DataNodeActivity-...}, whose {@code BytesRead} counts the bytes
 *       it served). All DataNodes of a MiniDFSCluster share one JVM, so
 *       every DataNode's {@code /jmx} lists every DataNode's bean: select by
 *       name. The JMX figures are refreshed every second
 *       ({@code hadoop-metrics2.properties}).</li>
 *   <li>{@code STATE_DIR/url}: {@code hdfs://127.0.0.1:PORT}, written last,
 *       so a reader that sees it sees a ready cluster.</li>
 * </ul>
 *
 * <p>Controls arrive as files {@code STATE_DIR/commands/NAME.cmd} holding
 * one command ({@code stop-datanode INDEX}); the answer is written to
 * {@code NAME.done} ({@code ok} or {@code error: ...}). A polled directory,
 * unlike a FIFO, never blocks either side when the other is gone.
 *
 * <p>Environment: {@code PLFS_HDFS_DATANODES} (default 3) and
 * {@code PLFS_HDFS_REPLICATION} (default: 3, or the DataNodes if fewer;
 * never more than the DataNodes, or every append fails and leaves a lease
 * held). A close may take about 500 ms: the NameNode completes a file
 * only once a DataNode has reported its last block, answering "not yet"
 * before that, and hdfs-native retries after 500 ms.
 */
public final class Launcher {
    private static final int DATANODES_DEFAULT = 3;
    private static final int REPLICATION_DEFAULT = 3;
    private static final long COMMAND_POLL_MILLIS = 100;

    private Launcher() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: Launcher STATE_DIR");
            System.exit(2);
        }
        Path state = Paths.get(args[0]).toAbsolutePath();
        int datanodes = intFromEnv("PLFS_HDFS_DATANODES", DATANODES_DEFAULT);
        int replication = intFromEnv("PLFS_HDFS_REPLICATION", Math.min(REPLICATION_DEFAULT, datanodes));
        if (datanodes < 1) {
            fail("PLFS_HDFS_DATANODES=" + datanodes + " must be at least 1");
        }
        if (replication < 1 || replication > datanodes) {
            fail("PLFS_HDFS_REPLICATION=" + replication + " must be between 1 and the " + datanodes
                    + " DataNodes (more replicas than DataNodes make appends fail)");
        }

        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, state.resolve("data").toString());
        conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, replication);
        // plfs sets explicit access times (utimens), which HDFS refuses when
        // access times are off (precision 0); HDFS's own default of an hour
        // keeps reads from turning into NameNode writes.
        conf.setLong(DFSConfigKeys.DFS_NAMENODE_ACCESSTIME_PRECISION_KEY, 3_600_000L);

        // dfs.namenode.file.close.num-committed-allowed stays at HDFS's
        // default (0), as on production clusters. Allowing a close with the
        // last block only committed makes closes quicker, but until the
        // DataNodes report that block the NameNode leaves it out of the
        // file's length, so another process reading right after a sync sees
        // a short log (seen: a synced 8-byte log read back as 0 bytes).

        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
                .nameNodePort(0)
                .numDataNodes(datanodes)
                .format(true)
                .build();
        Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown, "minidfs-shutdown"));
        cluster.waitActive();

        StringBuilder lines = new StringBuilder();
        List<DataNode> nodes = cluster.getDataNodes();
        List<String> addresses = new ArrayList<>();
        for (int index = 0; index < nodes.size(); index++) {
            addresses.add(nodes.get(index).getDatanodeId().getXferAddr());
            DataNode node = nodes.get(index);
            lines.append(index)
                    .append(" http://127.0.0.1:").append(node.getInfoPort())
                    .append(" Hadoop:service=DataNode,name=").append(node.getMetrics().name())
                    .append('\n');
        }
        writeAtomically(state.resolve("datanodes.txt"), lines.toString());
        writeAtomically(state.resolve("url"), "hdfs://127.0.0.1:" + cluster.getNameNodePort() + "\n");
        System.err.println("minidfs: ready with " + datanodes + " DataNodes, replication " + replication);

        Path commands = state.resolve("commands");
        Files.createDirectories(commands);
        while (true) {
            for (Path command : pendingCommands(commands)) {
                String answer;
                try {
                    answer = run(cluster, addresses, Files.readString(command, StandardCharsets.UTF_8).trim());
                } catch (RuntimeException | IOException error) {
                    answer = "error: " + error;
                }
                String name = command.getFileName().toString();
                Files.delete(command);
                writeAtomically(commands.resolve(name.substring(0, name.length() - ".cmd".length()) + ".done"),
                        answer + "\n");
            }
            Thread.sleep(COMMAND_POLL_MILLIS);
        }
    }

    private static List<Path> pendingCommands(Path commands) throws IOException {
        List<Path> found = new ArrayList<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(commands, "*.cmd")) {
            entries.forEach(found::add);
        }
        found.sort(null);
        return found;
    }

    /** DataNodes are named by their index at start (datanodes.txt), which
     *  stays their name after others stop: MiniDFSCluster renumbers its own
     *  list on every stop, so they are stopped by transfer address. */
    private static String run(MiniDFSCluster cluster, List<String> addresses, String command) {
        String[] words = command.split("\\s+");
        if (words.length == 2 && words[0].equals("stop-datanode")) {
            int index = Integer.parseInt(words[1]);
            if (index < 0 || index >= addresses.size()) {
                return "error: no DataNode " + index + " (there are " + addresses.size() + ")";
            }
            if (cluster.stopDataNode(addresses.get(index)) == null) {
                return "error: DataNode " + index + " (" + addresses.get(index) + ") is not running";
            }
            return "ok";
        }
        return "error: unknown command \"" + command + "\" (known: stop-datanode INDEX)";
    }

    private static int intFromEnv(String name, int fallback) {
        String text = System.getenv(name);
        if (text == null || text.isEmpty()) {
            return fallback;
        }
        try {
            return Integer.parseInt(text.trim());
        } catch (NumberFormatException error) {
            fail(name + "=" + text + " is not a number");
            return fallback;
        }
    }

    private static void writeAtomically(Path target, String text) throws IOException {
        Path temp = target.resolveSibling(target.getFileName() + ".tmp");
        Files.writeString(temp, text, StandardCharsets.UTF_8);
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    private static void fail(String message) {
        System.err.println("minidfs: " + message);
        System.exit(2);
    }
}
