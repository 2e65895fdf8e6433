set -e
# Images without sshd get it installed; images that ship it (air-gapped mirrors) skip apt.
if [ ! -x /usr/sbin/sshd ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server
fi
mkdir -p /var/run/sshd
{{ lib("runtime/copy-ssh-keys.sh") }}
exec /usr/sbin/sshd -De
