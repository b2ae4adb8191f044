#!/bin/sh
# summary.sh DIR: the table of a make bench run, from its raw output in
# DIR (runs.txt, syscalls.txt, syscalls-by-call.txt, meta.txt; see
# tests/bench/results/README.md). run.sh appends it to DIR/summary.txt; run
# it again to regenerate the table from the same files.
set -eu
dir=${1:?usage: summary.sh DIR}
read -r rep tool sdur <"$dir/meta.txt"
# The median of a space-separated list, for both tables.
MEDIAN='
    function median(list,    a, n, i, j, x) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) {      # insertion sort: n is small
            x = a[i] + 0
            for (j = i - 1; j >= 1 && a[j] + 0 > x; j--) a[j + 1] = a[j]
            a[j + 1] = x
        }
        if (n == 0) return 0
        if (n % 2) return a[(n + 1) / 2] + 0
        return (a[n / 2] + a[n / 2 + 1]) / 2
    }
'
awk -v tool="$tool" -v sdur="$sdur" -v rep="$rep" "$MEDIAN"'
    FILENAME ~ /syscalls.txt$/ {
        k = $1 " " $2
        if ($4 > 0) {
            sc[k] = sprintf("%.2f", $3 / $4)
            cpuorder[++ncpu] = k; cu[k] = $5 / $4; cs[k] = $6 / $4
            cr[k] = sdur + 0 > 0 ? sprintf("%.0f", $4 / (sdur + 0)) : "-"
        }
        if ($8 > 0) {
            rwait[k] = $7 / $8 * 1000; rn[k] = $8
            rsync[k] = $9 > 0 ? sprintf("%.1f", $8 / $9) : "-"
            secs = sdur + 0
            rflush[k] = secs > 0 ? sprintf("%.0f", $9 / secs) : "-"
        }
        next
    }
    {
        k = $1 " " $2
        if (!(k in rps)) { order[++ncell] = k; cs_[k] = $1; tg[k] = $2 }
        rps[k] = rps[k] " " $4; p99[k] = p99[k] " " $5
        bad[k] += $6; sock[k] += $7; lost[k] += $8
        cpu[k] = cpu[k] " " $9; acc[k] = acc[k] " " $10
        rss[k] = rss[k] " " $11
        # The steal of the hypervisor over the run (runs.txt of older benches
        # has no such field).
        if (NF >= 14) {
            steal[k] = steal[k] " " $14; allsteal = allsteal " " $14
            nsteal++
            if ($14 + 0 > 5) nover++
            if ($14 + 0 > maxsteal) {
                maxsteal = $14 + 0; maxat = $1 " " $2 " run " $3
            }
        }
        # Bodies: the rate each connection moved its bodies at, from the
        # mean time a request took (a count of whole requests in a run is
        # too coarse for bodies of hundreds of MiB), times the clients.
        if ($1 ~ /-b[0-9]+$/ && $13 + 0 > 0) {
            b = $1; sub(/.*-b/, "", b)
            mbs[k] = mbs[k] " " ($12 * b / $13)
        }
    }
    END {
        for (c = 1; c <= ncell; c++) {
            k = order[c]; mrps[k] = median(rps[k]); mp99[k] = median(p99[k])
        }
        fmt = "%-20s %-9s %10s %10s %6s %6s %7s %8s %8s %8s %8s %8s %6s\n"
        printf fmt, "case", "target", "req/s", "p99", "vs", "p99 vs",
            "CPU us", "syscalls", "upstream", "RSS KiB", "non-2xx",
            "sock err", "lost"
        printf fmt, "", "", "(median)", "(median)", "nginx", "nginx",
            "/req", "/req", "conn/req", "/client", "(sum)", "(sum)", "(sum)"
        for (c = 1; c <= ncell; c++) {
            k = order[c]; n = cs_[k] " nginx"
            ratio = "-"; pr = "-"
            if (tg[k] != "nginx" && mrps[n] > 0) {
                ratio = sprintf("%.2fx", mrps[k] / mrps[n])
                if (mp99[n] > 0) pr = sprintf("%.2fx", mp99[k] / mp99[n])
            }
            printf fmt, cs_[k], tg[k],
                sprintf(mrps[k] < 100 ? "%.2f" : "%.0f", mrps[k]),
                sprintf("%.2f ms", mp99[k] / 1000), ratio, pr,
                sprintf("%.1f", median(cpu[k])),
                (k in sc) ? sc[k] : "-", sprintf("%.4f", median(acc[k])),
                sprintf("%.1f", median(rss[k])), bad[k], sock[k], lost[k]
        }
        nb = 0
        for (c = 1; c <= ncell; c++) if (order[c] in mbs) nb++
        if (nb) {
            print ""
            print "bodies: MB/s = clients x body bytes / the mean time a" \
                " request took (wrk), medians:"
            for (c = 1; c <= ncell; c++) {
                k = order[c]; n = cs_[k] " nginx"
                if (!(k in mbs)) continue
                ratio = "-"
                if (tg[k] != "nginx" && median(mbs[n]) > 0)
                    ratio = sprintf("%.2fx", median(mbs[k]) / median(mbs[n]))
                printf "  %-20s %-9s %8.1f MB/s  vs nginx %6s   runs:", cs_[k],
                    tg[k], median(mbs[k]), ratio
                nr = split(mbs[k], a, " ")
                for (i = 1; i <= nr; i++) printf " %.1f", a[i]
                printf "\n"
            }
        }
        print ""
        print "requests/s of each run, in the order run:"
        for (c = 1; c <= ncell; c++) {
            k = order[c]
            printf "  %-20s %-9s %s\n", cs_[k], tg[k], substr(rps[k], 2)
        }
        if (nsteal) {
            printf "steal, the share of the machine'"'"'s CPU time the" \
                " hypervisor gave other guests during a run:\n  median" \
                " %.1f%%, highest %.1f%% (%s); %d of %d runs above 5%%\n",
                median(allsteal), maxsteal, maxat, nover + 0, nsteal
            if (nover) {
                print "  above 5%, a run measures the host as much as the" \
                    " target; steal of each run:"
                for (c = 1; c <= ncell; c++) {
                    k = order[c]
                    printf "  %-20s %-9s %s\n", cs_[k], tg[k],
                        substr(steal[k], 2)
                }
            }
        }
        print ""
        printf "medians of %d runs; vs nginx: the ratio of the medians.\n", rep
        print "CPU us/req: user + system time of the target'"'"'s processes" \
            " (/proc/PID/stat, all threads;\nnginx: master and worker; bare:" \
            " the upstream) over each run, divided by the requests answered."
        print "upstream conn/req: connections the upstream accepted over" \
            " the run (its stub_status),\ndivided by the requests answered" \
            " (bare: wrk'"'"'s own connections)."
        print "RSS KiB/client: the target'"'"'s peak RSS during the run" \
            " (VmRSS, sampled every 0.2 s) less\nits RSS before it, divided" \
            " by the clients."
        if (tool == "perf")
            printf "syscalls/req: all system calls of the target'"'"'s" \
                " processes (perf record -e raw_syscalls:sys_enter -c 1 -p)" \
                " over\none more wrk run of %s at the same load (the counted" \
                " run), divided by the requests wrk\nhad answered.\n", sdur
        else if (tool == "strace")
            printf "syscalls/req: strace -c -f -p over one more wrk" \
                " run of %s, divided by the requests answered\n(strace" \
                " slows the target: fewer calls are batched than at full" \
                " speed).\n", sdur
        if (ncpu) {
            print "CPU us/request over the counted run, user and system," \
                " and that run'"'"'s requests/s:"
            for (c = 1; c <= ncpu; c++) {
                k = cpuorder[c]
                printf "  %-30s user %6.1f  system %6.1f  (%s req/s)\n",
                    k, cu[k], cs[k], cr[k]
            }
        }
        for (c = 1; c <= ncell; c++) {
            k = order[c]
            if (!(k in rwait)) continue
            printf "store (%s): a raise waited %.2f ms on average for" \
                " the store to answer, %s raises a journal sync, %s" \
                " flushes/s, over the counted run.\n",
                k, rwait[k], rsync[k], rflush[k]
        }
        print "non-2xx: answers >= 400 as wrk counts them; tidemark answers"
        print "every stale request 409 by design (nginx does not fence and"
        print "forwards them). lost: requests whose connection closed"
        print "without an answer."
    }' "$dir/syscalls.txt" "$dir/runs.txt"
# pairs SEP FILE: FILE's lines "case target name<SEP>value ...", one a
# row, case and target in columns, each pair as "name value".
pairs() {
    awk -v sep="$1" '{ printf "  %-20s %-9s", $1, $2
           for (i = 3; i <= NF; i++) {
               split($i, kv, sep); printf " %s %s", kv[1], kv[2]
           }
           print "" }' "$2"
}
if [ -s "$dir/syscalls-by-call.txt" ]; then
    echo
    echo "system calls per request, by call (those made at least once" \
        "every 20 requests):"
    pairs "/" "$dir/syscalls-by-call.txt"
fi
if [ -s "$dir/threads.txt" ]; then
    echo
    echo "CPU us/request by thread over the counted run (user + system;" \
        "tidemark-lmdb: the store's writer, tidemark-log: the log's):"
    pairs "=" "$dir/threads.txt"
fi
if [ -s "$dir/refs.txt" ]; then
    echo
    echo "durable raises side by side (run.sh refs_run: in turn with tidemark): tidemark's" \
        "rising req/s and the references' durable writes/s, medians:"
    awk "$MEDIAN"'
        # The proxy'"'"'s core'"'"'s busy share (refs.txt and runs.txt of
        # older benches have none, or "-" when not pinned).
        FILENAME ~ /refs.txt$/ {
            v[$1 " " $2] = v[$1 " " $2] " " $4; seen[$1] = 1
            if (NF >= 5 && $5 != "-") {
                busy[$1 " " $2] = busy[$1 " " $2] " " $5; nbusy++
            }
            next
        }
        $1 ~ /^rising-c[0-9]+$/ && ($2 == "tidemark" || $2 == "nginx" ||
                                    $2 == "bare") {
            c = substr($1, 9); v[$2 " " c] = v[$2 " " c] " " $4
            if ($2 == "tidemark") cpu[c] = cpu[c] " " $9
            if ($2 == "tidemark" && NF >= 15 && $15 != "-") {
                busy[$2 " " c] = busy[$2 " " c] " " $15; nbusy++
            }
        }
        END {
            n = split("tidemark postgres redis etcd raw", who, " ")
            printf "%-8s", "clients"
            for (i = 1; i <= n; i++) printf " %9s", who[i]
            printf " %9s %9s\n", "tm/pg", "tm/c128"
            split("1 8 32 128 512", cs, " ")
            base = median(v["tidemark 128"])
            for (j = 1; j <= 5; j++) {
                c = cs[j]
                if (!(("tidemark " c) in v)) continue
                printf "%-8s", c
                for (i = 1; i <= n; i++) {
                    k = who[i] " " c
                    printf " %9s", (k in v) ? sprintf("%.0f", median(v[k])) : "-"
                }
                tm = median(v["tidemark " c]); pg = median(v["postgres " c])
                printf " %9s %9s\n", (pg > 0 ? sprintf("%.2fx", tm / pg) : "-"),
                    (base > 0 ? sprintf("%.2fx", tm / base) : "-")
                if (c == 1 && ("raw 1" in v))
                    raw1 = sprintf("%.2fx", tm / median(v["raw 1"]))
            }
            if (raw1 != "")
                print "tidemark at c=1 vs the raw write+fdatasync loop: " raw1
            # The rates at one client: the raw loop, a request proxied by
            # nginx, a durable write of Redis.
            raw = median(v["raw 1"]); ng = median(v["nginx 1"])
            rd1 = median(v["redis 1"])
            # Redis (appendfsync always) writes and syncs on its one loop
            # and answers with no upstream behind it: what a one-loop
            # server on this disk does, next to the same references.
            if (rd1 > 0 && raw > 0) {
                line = sprintf("Redis vs the raw loop at c=1: %.2fx;" \
                               " Redis vs PostgreSQL:", rd1 / raw)
                for (j = 1; j <= 5; j++) {
                    rd = median(v["redis " cs[j]])
                    pg = median(v["postgres " cs[j]])
                    if (rd > 0 && pg > 0)
                        line = line sprintf(" c=%s %.2fx", cs[j], rd / pg)
                }
                print line
            }
            # At c=1 a raise is flushed before it is forwarded, so its
            # time is at least a flush plus a proxied request: what a
            # proxy costing no more than nginx, flushing once, could do.
            if (raw > 0 && ng > 0) {
                cap = 1 / (1 / raw + 1 / ng)
                printf "c=1 ceiling: one flush (raw loop %.0f/s) then" \
                    " one request proxied as nginx does (%.0f/s), in" \
                    " series: %.0f/s = %.2fx the raw loop; tidemark" \
                    " does %.2fx of it\n", raw, ng, cap, cap / raw,
                    median(v["tidemark 1"]) / cap
            }
            # The same with Redis'"'"'s durable write for the flush: what the
            # flush costs a server answering one client at a time here.
            if (rd1 > 0 && ng > 0) {
                cap = 1 / (1 / rd1 + 1 / ng)
                printf "c=1 with Redis'"'"'s write (%.0f/s) for the flush," \
                    " then the request: %.0f/s; tidemark does %.2fx of" \
                    " it\n", rd1, cap, median(v["tidemark 1"]) / cap
            }
            # The proxy has one core: at the CPU a raise took, the most
            # raises a second that core could answer.
            line = ""
            for (j = 1; j <= 5; j++) {
                c = cs[j]; u = median(cpu[c]); pg = median(v["postgres " c])
                if (u <= 0) continue
                sep = line == "" ? "" : "\n"
                line = line sprintf("%s  c=%s: %.1f us, %.0f/s", sep, c, u,
                                    1e6 / u)
                if (pg > 0) line = line sprintf(" = %.2fx PostgreSQL",
                                                1e6 / u / pg)
            }
            if (line != "")
                print "one core busy all the time at tidemark'"'"'s CPU a" \
                    " raise (the proxy'"'"'s core: its loop and its writer):\n" \
                    line
            # The load generator and the upstream slow down with the
            # clients too: the same ratio for the other two targets.
            split("bare nginx", wh, " ")
            for (i = 1; i <= 2; i++) {
                a = median(v[wh[i] " 512"]); b = median(v[wh[i] " 128"])
                if (a > 0 && b > 0)
                    r512 = r512 sprintf(", %s %.2fx", wh[i], a / b)
            }
            if (base > 0 && r512 != "")
                printf "c=512 vs c=128, each target'"'"'s own: tidemark" \
                    " %.2fx%s\n", median(v["tidemark 512"]) / base, r512
            # Each server had the proxy'"'"'s core to itself: how busy it
            # kept it, and the core'"'"'s time a durable write (the busy
            # share over the writes a second). A core busy all the time
            # is the server'"'"'s bound; one that idles waits for the disk.
            if (nbusy == 0) exit
            print "the proxy'"'"'s core over each run, medians: how busy it" \
                " was (interrupts included, steal left out), and its busy" \
                " time a durable write:"
            printf "%-8s", "clients"
            for (i = 1; i <= n; i++) printf " %17s", who[i]
            print ""
            for (j = 1; j <= 5; j++) {
                c = cs[j]
                if (!(("tidemark " c) in v)) continue
                printf "%-8s", c
                for (i = 1; i <= n; i++) {
                    k = who[i] " " c; b = median(busy[k]); r = median(v[k])
                    if ((k in busy) && r > 0)
                        printf " %8.0f%% %5.0fus", b, b / 100 * 1e6 / r
                    else
                        printf " %17s", "-"
                }
                print ""
            }
            print "(pgbench connects its clients inside the busy share:" \
                " about 10 ms a client, telling at c=128 and c=512)"
        }' "$dir/refs.txt" "$dir/runs.txt"
fi
