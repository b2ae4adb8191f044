"""The tiers of the integration tests, told from the code a test runs: its
function, its fixtures' functions, and the functions and classes of the
test files they call, followed by name. A test that starts a multi-node
ensemble (servers.EtcdCluster, ZooKeeperEnsemble, RedisCluster) is
`cluster`; one that starts any other real server of servers.py, runs a
server or a tool client as a program, or imports a tool client library
is `backend`; a file that checks the packaging says so itself
(pytestmark = pytest.mark.packaging). What is none of these is the fast
tier: tidemark, the recording upstream and the standard library.
"""

import types

import servers

TIERS = {
    "cluster": "multi-node etcd, ZooKeeper or Redis Cluster ensembles and "
               "their failovers",
    "backend": "a real backend or store server (Apache, nginx, HAProxy, "
               "s3rver, Redis, PostgreSQL, etcd, ZooKeeper) or a tool "
               "client of one (Curator, aws, boto3, rclone, cadaver, kazoo)",
    "packaging": "the Debian package, the image, the Kubernetes and compose "
                 "examples",
}

CLUSTERS = {"EtcdCluster", "ZooKeeperEnsemble", "RedisCluster"}
# Programs that are a real server or a tool client of one, as a test
# names them to run them.
PROGRAMS = {"haproxy", "nginx", "apache2", "redis-server", "redis-cli",
            "etcd", "etcdctl", "java", "javac", "aws", "rclone", "cadaver",
            "psql", "pg_ctl", "postgres"}
LIBRARIES = {"boto3", "botocore", "kazoo"}


def _names(code):
    """Every name and string constant of code and the code nested in it."""
    names, strings = set(code.co_names), set()
    for c in code.co_consts:
        if isinstance(c, str):
            strings.add(c)
        elif isinstance(c, types.CodeType):
            n, s = _names(c)
            names |= n
            strings |= s
    return names, strings


def _functions(obj):
    """The plain functions obj stands for: itself, or a class's methods."""
    if isinstance(obj, types.FunctionType):
        return [obj]
    if isinstance(obj, type):
        return [f for f in vars(obj).values()
                if isinstance(f, types.FunctionType)]
    return []


def _from_servers(obj):
    return getattr(obj, "__module__", None) == servers.__name__


def tier_of(functions):
    """"cluster", "backend" or None for code that starts at functions,
    following the names it uses into the test files' own functions."""
    seen, todo, found = set(), list(functions), None
    while todo:
        fn = todo.pop()
        if fn.__code__ in seen:
            continue
        seen.add(fn.__code__)
        names, strings = _names(fn.__code__)
        if "servers" in names and names & CLUSTERS:
            return "cluster"
        if "servers" in names or strings & PROGRAMS or names & LIBRARIES:
            found = "backend"
        for name in names:
            obj = fn.__globals__.get(name)
            if obj is None:
                continue
            if _from_servers(obj):
                if name in CLUSTERS:
                    return "cluster"
                found = "backend"
            elif isinstance(obj, types.ModuleType) and \
                    obj.__name__.split(".")[0] in LIBRARIES:
                found = "backend"
            elif getattr(obj, "__module__", "").startswith("test_"):
                todo.extend(_functions(obj))
    return found
