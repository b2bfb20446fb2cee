#!/usr/bin/env bash
# Installs everything kmon needs on a fresh Debian machine, idempotently:
#   - Debian packages: Java 17, Maven, Prometheus (+ promtool), Alertmanager
#   - the Python venv (.venv) with the versions pinned in constraints.txt, installed by uv (kept in the cache)
#     from a wheelhouse in the cache
#   - the Kafka broker + ZooKeeper jars (3.9.2), a Kafka 4.x node's jars (the stack's KRaft mode)
#     and Spark's Kafka source jars, from Maven Central, into the cache ($KMON_CACHE, default
#     ~/.cache/kmon), never into git.
#   - with --with-helm (the tests'): Helm, built from the Go module proxy into the cache (~4 min, once)
# A second run only checks stamps and returns in about a second.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${KMON_CACHE:-$HOME/.cache/kmon}
venv=${KMON_VENV:-$repo/.venv}
mkdir -p "$cache"

say() { printf '[install] %s\n' "$*" >&2; }

# ---- Debian packages
need_pkgs=()
command -v java >/dev/null || need_pkgs+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need_pkgs+=(maven)
command -v prometheus >/dev/null || need_pkgs+=(prometheus)
command -v promtool >/dev/null || need_pkgs+=(prometheus)
command -v prometheus-alertmanager >/dev/null || need_pkgs+=(prometheus-alertmanager)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_pkgs+=(python3-venv)
command -v systemd-analyze >/dev/null || need_pkgs+=(systemd)      # checks deploy/systemd (tests)
command -v openssl >/dev/null || need_pkgs+=(openssl)              # certificates of `kmon stack up --secure`
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_pkgs[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need_pkgs[@]}"
  # the Debian packages start system services where systemd runs; kmon runs its own
  for svc in prometheus prometheus-alertmanager prometheus-node-exporter; do
    $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true
  done
fi

# ---- Python venv
# From a wheelhouse in the cache (one per constraints.txt and Python), installed by uv, which links the files
# from its own cache: a fresh clone's venv in a few seconds. pip from PyPI, as before, took 30-40 s (most of it
# resolving and revalidating the index: bench/NOTES.md), and stays the fallback.
UV_VERSION=0.13.9
stamp_of() { cat "$@" | sha256sum | cut -c1-16; }
want=$(stamp_of "$repo/pyproject.toml" "$repo/constraints.txt")
pyver=$(python3 -c 'import sys; print(sys.version)')
wheels="$cache/wheels/$( { cat "$repo/constraints.txt"; echo "$pyver"; } | sha256sum | cut -c1-16)"
tools="$cache/tools"
build_wheels() {  # every wheel the venv takes (kmon's own excepted), built or fetched once
  say "building the wheels of kmon's dependencies into $wheels (once per constraints.txt)"
  rm -rf "$wheels.tmp"
  "$tools/bin/pip" wheel -q --disable-pip-version-check -w "$wheels.tmp" -c "$repo/constraints.txt" "$repo[test]" \
    "setuptools>=68" pip >&2
  rm -f "$wheels.tmp"/kmon-*.whl
  rm -rf "$wheels" && mv "$wheels.tmp" "$wheels"
  # the wheelhouses of earlier constraints go, but for the newest other one (a checkout of an older commit)
  ls -dt "$cache/wheels"/*/ 2>/dev/null | tail -n +3 | xargs -r rm -rf
}
uv_install() {
  UV_CACHE_DIR="$cache/uv" "$tools/bin/uv" pip install -q --python "$venv/bin/python" --link-mode hardlink --no-index --find-links "$wheels" \
    -c "$repo/constraints.txt" -e "$repo[test]" pip
}
if [ "$(cat "$venv/.kmon-stamp" 2>/dev/null)" != "$want" ]; then
  say "creating/updating Python venv in $venv"
  if [ ! -x "$tools/bin/uv" ] || [ "$("$tools/bin/uv" --version 2>/dev/null)" != "uv $UV_VERSION" ]; then
    [ -x "$tools/bin/pip" ] || python3 -m venv "$tools"
    "$tools/bin/pip" install -q --disable-pip-version-check "uv==$UV_VERSION"
  fi
  [ -d "$wheels" ] || build_wheels
  [ -x "$venv/bin/python" ] || python3 -m venv --without-pip "$venv"
  # a dependency the wheelhouse lacks (pyproject changed, constraints.txt not): the wheels once more, then pip
  if ! uv_install && ! { build_wheels && uv_install; }; then
    say "uv could not install from $wheels: pip from the index instead"
    "$venv/bin/python" -m ensurepip -q 2>/dev/null || true
    # --no-compile: byte-compiling every module of pyspark's wheel was a third of the install (42 -> 28 s)
    "$venv/bin/python" -m pip install -q --no-compile --disable-pip-version-check -c "$repo/constraints.txt" -e "$repo[test]"
  fi
  echo "$want" > "$venv/.kmon-stamp"
fi

# ---- jars from Maven Central
fetch_jars() {  # pom-dir target-dir
  local pom=$1/pom.xml target=$2 want
  want=$(stamp_of "$pom")
  if [ "$(cat "$target/.kmon-stamp" 2>/dev/null)" != "$want" ]; then
    say "resolving $(basename "$1") jars from Maven Central into $target"
    rm -rf "$target.tmp" && mkdir -p "$target.tmp"
    mvn -q -B -U -s "$repo/deploy/maven/settings.xml" -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$target.tmp" >&2
    echo "$want" > "$target.tmp/.kmon-stamp"
    rm -rf "$target" && mv "$target.tmp" "$target"
  fi
}
fetch_jars "$repo/deploy/maven/kafka" "$cache/jars/kafka"
fetch_jars "$repo/deploy/maven/kafka4" "$cache/jars/kafka4"
fetch_jars "$repo/deploy/maven/spark-kafka" "$cache/jars/spark-kafka"
# ---- Helm, for the chart's tests (deploy/helm): built from the Go module proxy, a pinned version
HELM_VERSION=v3.22.0
if [ "${1:-}" = "--with-helm" ]; then
  helm_bin="$cache/go/bin/helm"
  # a stamp, not `helm version`: built by `go install`, Helm reports "v3.22", never the tag
  if [ ! -x "$helm_bin" ] || [ "$(cat "$helm_bin.version" 2>/dev/null)" != "$HELM_VERSION" ]; then
    command -v go >/dev/null || { say "Go is needed to build Helm $HELM_VERSION (https://go.dev/dl/)"; exit 1; }
    say "building Helm $HELM_VERSION from the Go module proxy into $helm_bin (about 4 minutes, once)"
    GOBIN="$cache/go/bin" GOPATH="$cache/go" GOMODCACHE="$cache/go/mod" GOFLAGS=-modcacherw \
      go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
    echo "$HELM_VERSION" > "$helm_bin.version"
  fi
fi
say "ready: venv $venv, jars in $cache/jars"
