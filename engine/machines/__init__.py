"""The lifecycle state machines (occurrence, proposal, run), compiled from the rules.

- `states`: the stable state, trigger and condition names (pure)
- `specs`: the machines as data, shaped by a rules `Profile` (pure)
- `profiles`: RuleSet -> the profile of each loop and event type (pure)
- `table`: the fast path, `Table.fire(state, trigger, context)` (pure)
- `errors`: IllegalTransition, ConditionFailed and the rest of this layer's errors
- `compiled`: the one module that imports `transitions`; compiles each spec once
- `catalog`: `Machines.from_rules(rules)`, the machines of every loop and event type
- `diagrams`: mermaid, dot and svg through transitions' own diagram support

This package module imports nothing, so importing a pure submodule stays pure."""
