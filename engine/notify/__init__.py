"""Notification sinks (docs/notifications.md): where `engine serve` delivers what the
engine announces. `config` reads them from the environment and
config/notifications.yaml, `message` renders a notification, `signing` signs the
generic webhook as Standard Webhooks specify, `redact` keeps secrets out of what is
shown, and `sinks` sends."""
