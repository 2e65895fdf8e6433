# Under a gang scheduler the launcher starts together with the workers (it cannot wait for them
# to be Ready without splitting the gang), so it waits here for every worker's sshd.
deadline=$(( $(date +%s) + 1200 ))
for host in $(awk '{print $1}' /etc/mpi/hostfile); do
  until (exec 3<>"/dev/tcp/${host}/22") 2>/dev/null; do
    if [ "$(date +%s)" -ge "${deadline}" ]; then
      echo "not every worker answered sshd within 20 minutes (${host} did not); see the worker pods' events" >&2
      exit 1
    fi
    sleep 5
  done
done
