/*
 * An application that locks with Apache Curator's InterProcessMutex, the
 * way doc/guide.md tells it to fence its writes: the holder's lock node is
 * the first of getParticipantNodes(), and its czxid is the token.
 *
 *   java -cp /usr/share/java/curator-recipes.jar CuratorHolder.java \
 *       HOSTS LOCK_PATH DOC PORT SESSION_TIMEOUT_MS
 *
 * Takes the mutex (waiting for it as long as it takes) and prints
 * "token CZXID NODE". Then, for each line TAG on stdin, PUTs TAG to
 * http://127.0.0.1:PORT/v1/documents/DOC with Fencing-Token: CZXID and
 * X-Test-Id: TAG, and prints "TAG STATUS". At the end of stdin it
 * releases the mutex and exits.
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

public class CuratorHolder {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: CuratorHolder HOSTS LOCK_PATH DOC PORT "
                               + "SESSION_TIMEOUT_MS");
            System.exit(2);
        }
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(args[0])
            .sessionTimeoutMs(Integer.parseInt(args[4]))
            .retryPolicy(new RetryOneTime(100))
            .build();
        client.start();
        InterProcessMutex mutex = new InterProcessMutex(client, args[1]);
        mutex.acquire();
        String node = mutex.getParticipantNodes().iterator().next();
        long czxid = client.checkExists().forPath(node).getCzxid();
        System.out.println("token " + czxid + " " + node);
        System.out.flush();

        HttpClient http = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(30))
            .build();
        URI uri = URI.create("http://127.0.0.1:" + args[3]
                             + "/v1/documents/" + args[2]);
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in));
        String tag;
        while ((tag = in.readLine()) != null) {
            HttpRequest put = HttpRequest.newBuilder(uri)
                .timeout(Duration.ofSeconds(30))
                .header("Fencing-Token", Long.toString(czxid))
                .header("X-Test-Id", tag)
                .PUT(HttpRequest.BodyPublishers.ofString(tag))
                .build();
            HttpResponse<String> r =
                http.send(put, HttpResponse.BodyHandlers.ofString());
            System.out.println(tag + " " + r.statusCode());
            System.out.flush();
        }
        mutex.release();
        client.close();
    }
}
