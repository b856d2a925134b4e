"""The lifecycle state machines built with `transitions`, for diagrams and the parity
test. The runtime fires the tables in `engine.core.machines`; this package reads them.

- `specs`: the core tables in the shape transitions builds from (pure)
- `errors`: UnknownMachine, DiagramUnavailable
- `compiled`: the one module that imports `transitions`; compiles each spec once
- `catalog`: `Machines.from_rules(rules)`, the machines of every loop and event type
- `diagrams`: mermaid, dot and svg through transitions' own diagram support

This package module imports nothing, so importing a pure submodule stays pure."""
