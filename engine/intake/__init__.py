"""Intake at the boundary: deliveries from other systems verified and translated into
`factory.event/v1` envelopes. Pure: no I/O, no clock (`now` is an argument).

- `github`: `X-Hub-Signature-256` verification and the `webhook github KIND` tables of
  `loops/github.rules` (docs/github.md)."""
