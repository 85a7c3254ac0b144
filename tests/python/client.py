"""`python3 ARGS` through the suite's warm interpreter (tests/python/server.py), started as
`python3 -I -S client.py ARGS`: it imports nothing but the standard library's socket, so it starts
in milliseconds. It hands the server its argv, working directory, environment and standard
streams, and exits with the script's status. Where no server listens at $XTRAIN_PYTHON_SERVER, or
it declines the call, it becomes the real interpreter: the result is the same either way.
"""
import json
import os
import signal
import socket
import struct
import sys


def run_directly():
    os.execv(sys.executable, [sys.executable] + sys.argv[1:])


def main():
    path = os.environ.get("XTRAIN_PYTHON_SERVER")
    if not path:
        run_directly()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
        body = json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        socket.send_fds(connection, [struct.pack("<Q", len(body))], [0, 1, 2])
        connection.sendall(body)
    except OSError:
        connection.close()
        run_directly()
    # Killed by a signal, the caller closes the connection, and the server kills the script.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    reply = b""
    while not reply.endswith(b"\n"):
        more = connection.recv(64)
        if not more:
            sys.exit("python server: gone while running " + " ".join(sys.argv[1:2]))
        reply += more
    answer = reply.decode().split()
    if answer[0] == "declined":
        connection.close()
        run_directly()
    code = int(answer[1])
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
