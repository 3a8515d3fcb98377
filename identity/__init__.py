"""Who a person is: OIDC sign-in, API tokens, the audit log.

Sign-in with an OpenID Connect provider (Authlib's Django client) and what a person's
claims make of them in the portal.

- mapping: pure functions, claims -> portal user fields, groups -> decision
- models: Identity, the (issuer, subject) a portal user signs in as
- provider: the Authlib client and the provider's keys for API access tokens
- signin: one sign-in applied to the database (user, flags, cluster accounts, tokens)
- backends: the local-password rule and the session backend
- views: /oidc/login/, /oidc/callback/, /oidc/logout/ and the sign-in page
"""
