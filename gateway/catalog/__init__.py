"""The published tools as the MCP surface shows them, built from the config and the backends' own listings.

    published  one ``PublishedTool`` per configured tool: its ``Tool`` (the face its kind gives), argument checks
    risk       each tool's risk in the shape of SEP-2793, from the config alone, under the tool's ``_meta``
    schemas    JSON Schema checks, strict (no coercion), compiled once, and their published, portable form
    patterns   a schema's regular expressions, run by RE2 in linear time (a backend's pattern is untrusted)
    answers    a backend's own tool's answer as its published tool admits it (fits the schema and the caps)
    live       the catalog as the backends allow it now: one part per backend, loaded, pinged and reloaded on its
               own, so a backend that hangs or dies takes only its own tools away

``published``, ``risk``, ``schemas``, ``patterns`` and ``answers`` are pure apart from reading the config; ``live``
does the I/O of loading (through the backend clients) and runs in the gateway's background. The tools and the write
package read what it built.

Imported by the tools, the write package, the MCP surface, the runtime and the CLI; imports config, backend,
records, errors and text.
"""
