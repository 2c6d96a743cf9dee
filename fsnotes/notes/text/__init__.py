"""Pure functions of a note's text: Markdown (title, headings, tags, frontmatter), sections,
frontmatter edits, structured edits, links and their resolution rules, search-query parsing,
``where`` filters and daily-note names. No file, index or request here.
"""
