# Sourced by family scripts: pip_venv WHO VENV REQUIREMENT installs REQUIREMENT (pinned,
# e.g. `ziglang==0.14.1`) into a fresh virtual environment VENV, after installing Debian's
# python3-venv if this machine's python3 cannot make one. WHO names the script in messages.
pip_venv() {
  local who="$1" venv="$2" req="$3"
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    echo "$who: installing python3-venv (apt)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq python3 python3-venv >/dev/null
  fi
  echo "$who: installing $req into $venv (pip)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$req"
}
