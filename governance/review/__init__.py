"""The reviewer UI: server-rendered pages for the people who decide on memories.

- `views`: home, queues (quarantine, drift), a memory's page and its decisions, forget requests;
  `proposals`, `revocations`, `holds`, `golden`, `notifications`, `asof`, `export`: one page
  family each; `dashboard`: the governance numbers, computed in `stats` and drawn by `charts`
  (server-side SVG);
- `selectors`: the review queues' sizes and oldest items (also read by /metrics);
- `common`: the reviewer check, page rendering and paging every page shares; `forms`, `urls`.
"""
