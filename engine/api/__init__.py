"""The HTTP face of the runtime (aiohttp): intake, operator routes, status. Handlers
parse, call the same Service the CLI calls (in a thread), and serialise.
`engine.api.app.make_app(service, settings)` builds the application; this package
root imports nothing, so the CLI's listing commands can share `engine.api.wire`
without loading aiohttp."""
