"""A real PostgreSQL server for the tests: started once per session from the server binaries
of Debian's ``postgresql`` package (``initdb``, ``pg_ctl``), listening on 127.0.0.1 only.

    server = PostgresServer.start(workdir_parent)     # initdb + pg_ctl start, a free port
    url = server.create_database("t1")                # postgresql+psycopg://autotune:...@127.0.0.1:PORT/t1
    server.stop()                                     # pg_ctl stop, then the data directory is removed

The server runs as an unprivileged user when the tests run as root (initdb and postgres
refuse root): the ``postgres`` account the Debian package creates, else ``nobody``. Its data
directory, log and unix socket live in a fresh temporary directory that user owns. Host
connections need a password (scram-sha-256), so the URLs the tests use carry one, and
messages that name the database can be checked for hiding it.

A watchdog process stops the server (immediate shutdown) and deletes its files when the
process that started it dies without calling ``stop`` (SIGKILL, SIGTERM), so no server
outlives the test session however it ends.

``find_binaries`` says why no server can be started (no binaries, no driver) so the fixture
can skip with that reason, or fail where ``$AUTOTUNE_REQUIRE_POSTGRES`` says the server must
be there (``.ci/run`` sets it once it has installed the package).
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL

REQUIRE_ENV = "AUTOTUNE_REQUIRE_POSTGRES"
USER = "autotune"
PASSWORD = "s3cret-test-password"
_START_ATTEMPTS = 3

#: argv: the pid of the test process, the server's work directory. Waits for the test process
#: to end (this process is then re-parented), then stops the server and removes its files.
_WATCHDOG = """
import os, shutil, signal, sys, time
parent, workdir = int(sys.argv[1]), sys.argv[2]
while os.getppid() == parent:
    time.sleep(0.5)
try:
    with open(os.path.join(workdir, "data", "postmaster.pid")) as f:
        postmaster = int(f.readline())
    os.kill(postmaster, signal.SIGQUIT)
    for _ in range(600):
        os.kill(postmaster, 0)
        time.sleep(0.05)
except (OSError, ValueError):
    pass
shutil.rmtree(workdir, ignore_errors=True)
"""


def find_binaries() -> tuple[Path | None, str]:
    """The directory holding ``initdb`` and ``pg_ctl``, or None and why not."""
    try:
        import psycopg  # noqa: F401  (the driver the URLs name)
    except ImportError:
        return None, "psycopg (PostgreSQL driver) is not installed: pip install -e '.[postgres]'"
    candidates = [Path(p).parent for p in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for bindir in candidates:
        if (bindir / "pg_ctl").exists():
            return bindir, ""
    return None, "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"


def required() -> bool:
    """Whether a missing server is a failure rather than a skip (set on CI)."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def _server_user() -> pwd.struct_passwd | None:
    """The account the server runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root, and neither a 'postgres' nor a 'nobody' account exists to run the server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    bindir: Path
    workdir: Path          # data/, the log, the socket directory, the password file
    port: int
    account: pwd.struct_passwd | None
    watchdog: subprocess.Popen | None = None

    @classmethod
    def start(cls, bindir: Path) -> PostgresServer:
        """initdb a fresh cluster and start it on a free port of 127.0.0.1; retried on a port race."""
        account = _server_user()
        workdir = Path(tempfile.mkdtemp(prefix="autotune-pg-"))
        if account is not None:
            os.chown(workdir, account.pw_uid, account.pw_gid)
        server = cls(bindir, workdir, 0, account)
        try:
            server._initdb()
            for attempt in range(_START_ATTEMPTS):
                server.port = _free_port()
                if server._pg_ctl_start():
                    server.watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()),
                                                        str(workdir)], start_new_session=True)
                    return server
            raise RuntimeError(f"PostgreSQL did not start; its log:\n{server.log_tail()}")
        except BaseException:
            server.stop()
            raise

    # ------------------------------------------------------------------ processes

    def _run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a server binary as the server's account, in the work directory."""
        kwargs = {}
        if self.account is not None:
            kwargs = {"user": self.account.pw_uid, "group": self.account.pw_gid, "extra_groups": []}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        return subprocess.run([str(self.bindir / args[0]), *args[1:]], cwd=self.workdir, env=env,
                              capture_output=True, text=True, check=check, timeout=timeout, **kwargs)

    def _initdb(self) -> None:
        pwfile = self.workdir / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if self.account is not None:
            os.chown(pwfile, self.account.pw_uid, self.account.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", USER, f"--pwfile={pwfile}", "-E", "UTF8",
                  "--no-locale", "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync")
        pwfile.unlink()

    def _pg_ctl_start(self) -> bool:
        """Start the server on ``self.port``; False when it did not come up (e.g. the port was taken)."""
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.workdir} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
        result = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60",
                           "start", check=False)
        return result.returncode == 0

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended) and delete its files."""
        if self.watchdog is not None:
            self.watchdog.kill()
            self.watchdog.wait()
            self.watchdog = None
        if (self.data / "postmaster.pid").exists():
            result = self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop", check=False)
            if result.returncode != 0:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def data(self) -> Path:
        return self.workdir / "data"

    @property
    def log(self) -> Path:
        return self.workdir / "server.log"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def pid(self) -> int | None:
        """The postmaster's pid while it runs."""
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    # ------------------------------------------------------------------ databases

    def url(self, database: str = "postgres") -> URL:
        return URL.create("postgresql+psycopg", username=USER, password=PASSWORD, host="127.0.0.1",
                          port=self.port, database=database)

    def _admin(self, sql: str) -> None:
        engine = create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(text(sql))
        finally:
            engine.dispose()

    def create_database(self, name: str) -> str:
        """A new, empty database; its URL as a string, password included."""
        self._admin(f'CREATE DATABASE "{name}"')
        return self.url(name).render_as_string(hide_password=False)

    def drop_database(self, name: str) -> None:
        """Drop a database, ending any session still connected to it."""
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

