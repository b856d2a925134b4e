"""The operator's web pages, served by `engine serve` at `/` (docs/web.md)."""
