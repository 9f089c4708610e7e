"""The visitor: whoever chats in the widget, anonymous or signed in, and everything that says
who they are or follows them from one page to the next (docs/architecture.md "Names").

- ``visitor``: ``Visitor``, the signed-in visitor, one frozen type from the door to ``$user``;
- ``identity``: an agent's ``identity`` block, how the site signs its tokens, and
  ``Identity``, a token verified with it;
- ``identity_tokens``: verifying those tokens (PyJWT) and caching the site's JWKS;
- ``sessions``: the widget's session cookie, bound to the page's resume key and carrying
  the browser's id, and the resume route;
- ``session_requests``: what every request made with a session token checks first;
- ``known``: the routes of a signed-in visitor (identify, open one of theirs, log out);
- ``personal_data``: a person's data (a signed-in visitor's ``sub``) exported or erased whole;
- ``person_command``: ``hostcall person export|erase``, the same from the command line.

The modules sit in different layers (a ``Visitor`` is a value the store reads back, the
routes are web): pyproject.toml's import contract lists each in its own, and this file
imports nothing, so the store reads a ``Visitor`` back without loading the routes.
"""
