"""The routes of `mtkit serve`, one FastAPI ``APIRouter`` per module, each given the shared `Server`
(`mtkit.serve.context`) as a dependency: LibreTranslate's API (`libre`), mtkit's own (`v1`),
health and metrics (`ops`), and the web page (`page`). `mtkit.serve.app` puts them together."""
