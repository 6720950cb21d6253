"""The daemon and the machine it runs on: the composition root, lifecycle, sd_notify, status,
doctor, systemd units, logs, paths, keys and durable files."""
