"""Who is calling: principals, the caller of the current request, bearer-token verifiers, and the secret keys.

    principal  a caller as (issuer, client, subject), encoded once for stores and audit
    person     a person as (issuer, subject): the one space callers and approvers are compared in (four eyes)
    caller     the current caller and its scopes (a request's access token, or the stdio caller), and authorization
    verifiers  bearer tokens checked as the config says: static hashes, JWT (JWKS or PEM), RFC 7662 introspection
    standing   what a task keeps of its caller's token (a hash, or sealed), and the check made again when the
               gateway resumes the call: the caller as if it called now
    secrets    the sealing and audit keys (from the environment, or generated once into the state directory),
               and the start-up check that every secret the config names can be read

May be imported by anything above config; imports only config, errors and the SDK's auth context.
"""
