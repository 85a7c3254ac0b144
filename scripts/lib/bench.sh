# Sourced by the benchmark scripts, from the repository root: builds xtrain and sets
#   xtrain  the executable;
#   python  the Python with the references ($XTRAIN_PYTHON, else the project's venv);
#   work    a scratch folder, removed on exit;
# and port, which prints a TCP port nothing listens on now.
bash scripts/build.sh > /dev/null
xtrain=$PWD/build/xtrain
python=${XTRAIN_PYTHON:-.venv/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
