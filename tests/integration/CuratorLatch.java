/*
 * An application that elects its leader with Apache Curator's
 * LeaderLatch, as a replica does: its participant id is its identity
 * (a pod's name), and it writes nothing to tidemark itself.
 *
 *   java -cp /usr/share/java/curator-recipes.jar CuratorLatch.java \
 *       HOSTS LATCH_PATH ID SESSION_TIMEOUT_MS
 *
 * Starts the latch and prints "started". Once this participant is the
 * leader it prints "leader ID NODE CZXID" (its own latch node and that
 * node's czxid, the fence tidemark's [follow] gives the leader). At the
 * end of stdin it closes the latch and exits.
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLatch {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: CuratorLatch HOSTS LATCH_PATH ID "
                               + "SESSION_TIMEOUT_MS");
            System.exit(2);
        }
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(args[0])
            .sessionTimeoutMs(Integer.parseInt(args[3]))
            .retryPolicy(new RetryOneTime(100))
            .build();
        client.start();
        LeaderLatch latch = new LeaderLatch(client, args[1], args[2]);
        latch.start();
        System.out.println("started");
        System.out.flush();
        latch.await();
        String node = null;
        for (String kid : client.getChildren().forPath(args[1])) {
            String path = args[1] + "/" + kid;
            if (new String(client.getData().forPath(path), "UTF-8")
                    .equals(args[2])) {
                node = path;
            }
        }
        long czxid = client.checkExists().forPath(node).getCzxid();
        System.out.println("leader " + args[2] + " " + node + " " + czxid);
        System.out.flush();
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in));
        while (in.readLine() != null) {
        }
        latch.close();
        client.close();
    }
}
