"""Memory that can leave the app as plain files and come back through the lifecycle.

- `notes`: the file format, defined once: one Markdown note per record, YAML front matter with
  every governed field, the content as the body; a forgotten record is a content-free tombstone.
- `export`: a tenant's records as notes in a folder a person can browse (by subject), on disk
  (`manage.py export_memories`) or as a zip (the reviewer download).
- `importer`: notes back in as writes with provenance `import` (`manage.py import_memories`),
  quarantined unless the credential may import trusted memory, idempotent, links restored, a
  report per file.

`memory` never imports `governance`: governance adds its checks on an import (a subject that was
forgotten here is refused) through `importer.register_import_guard` from its AppConfig.ready().
"""
