"""Who may do what, and proof that a request is the one a person confirmed.

Grants (principals, workspaces, access levels), sealed request state and its keyring, what
a sealed question is bound to and what the answer said (``consent``), the rendering of
values a person must judge (``shown``), and the HTTP transport's bearer tokens (``tokens``:
stored as digests, behind ``Authenticator``) and OAuth access tokens (``oauth``, with PyJWT;
its settings in ``oauth_settings``, readable without it). The stores these decisions rest on
(replay, audit, history, the state directory) are ``fsnotes.state``'s.

``__all__`` is what other packages use (``shown`` as a whole module: it would hide a
function of that name here anyway). Each is imported on first use, so importing one module
does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsnotes._exports import lazy_exports

if TYPE_CHECKING:
    from fsnotes.security import shown
    from fsnotes.security.consent import Binding, ConsentRefused, Subject, answer_of, open_state
    from fsnotes.security.grants import (
        Access,
        Grant,
        Grants,
        NotGranted,
        RuntimeLayer,
        Scope,
        Workspace,
        check_level,
    )
    from fsnotes.security.oauth import Chained, OAuthTokens
    from fsnotes.security.oauth_settings import (
        RESOLVER_FILES,
        OAuthConfigError,
        OAuthSettings,
        oauth_settings_from,
    )
    from fsnotes.security.seal import Keyring, Sealer
    from fsnotes.security.shown import distinguishable, has_hidden
    from fsnotes.security.tokens import (
        TOKENS_FILE,
        Authenticator,
        BearerTokens,
        Identity,
        InsufficientScope,
        TokenEntry,
        TokenFileError,
        Unauthenticated,
        add_token,
        entry_from,
        read_tokens,
        revoke_tokens,
    )

__all__ = [
    "RESOLVER_FILES",
    "TOKENS_FILE",
    "Access",
    "Authenticator",
    "BearerTokens",
    "Binding",
    "Chained",
    "ConsentRefused",
    "Grant",
    "Grants",
    "Identity",
    "InsufficientScope",
    "Keyring",
    "NotGranted",
    "OAuthConfigError",
    "OAuthSettings",
    "OAuthTokens",
    "RuntimeLayer",
    "Scope",
    "Sealer",
    "Subject",
    "TokenEntry",
    "TokenFileError",
    "Unauthenticated",
    "Workspace",
    "add_token",
    "answer_of",
    "check_level",
    "distinguishable",
    "entry_from",
    "has_hidden",
    "oauth_settings_from",
    "open_state",
    "read_tokens",
    "revoke_tokens",
    "shown",
]

# The module of this package that defines each public name (a module named for itself
# is that module).
_HOME = {
    "Access": "grants",
    "Authenticator": "tokens",
    "BearerTokens": "tokens",
    "Binding": "consent",
    "Chained": "oauth",
    "ConsentRefused": "consent",
    "Grant": "grants",
    "Grants": "grants",
    "Identity": "tokens",
    "InsufficientScope": "tokens",
    "Keyring": "seal",
    "NotGranted": "grants",
    "OAuthConfigError": "oauth_settings",
    "OAuthSettings": "oauth_settings",
    "OAuthTokens": "oauth",
    "RESOLVER_FILES": "oauth_settings",
    "RuntimeLayer": "grants",
    "Scope": "grants",
    "Sealer": "seal",
    "Subject": "consent",
    "TOKENS_FILE": "tokens",
    "TokenEntry": "tokens",
    "TokenFileError": "tokens",
    "Unauthenticated": "tokens",
    "Workspace": "grants",
    "add_token": "tokens",
    "answer_of": "consent",
    "check_level": "grants",
    "distinguishable": "shown",
    "entry_from": "tokens",
    "has_hidden": "shown",
    "oauth_settings_from": "oauth_settings",
    "open_state": "consent",
    "read_tokens": "tokens",
    "revoke_tokens": "tokens",
    "shown": "shown",
}

__getattr__ = lazy_exports(__name__, _HOME)
