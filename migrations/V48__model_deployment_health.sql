-- The health of each model deployment (an upstream serving a configured
-- model), shared by every instance so that a failing upstream is left
-- alone by all of them at once, not tried once per instance.
--
-- `failures` counts the failures since `window_started_at` (the window
-- restarts once it is older than `providers.fail_window_secs`); past
-- `providers.allowed_fails` (or at once for a 429, a 529 or a refused
-- connection) the deployment cools down until `cooldown_until`. When the
-- cooldown ends one request takes the probe (it moves `cooldown_until`
-- forward by the first-event timeout) and the others keep away until it
-- answers. A 401 or 403 disables the deployment while its configuration's
-- fingerprint (a hash of its URL, upstream model and key; never the key)
-- is `disabled_fingerprint`: a changed key enables it again.
--
-- Keyed by the names in the configuration, which are what an operator
-- sees; rows of deployments no longer configured are harmless and shown
-- to nobody.
CREATE TABLE model_deployment_health (
    model                 text NOT NULL,
    deployment            text NOT NULL,
    failures              integer NOT NULL DEFAULT 0,
    window_started_at     timestamptz NOT NULL DEFAULT now(),
    cooldown_until        timestamptz,
    cooldowns             bigint NOT NULL DEFAULT 0,
    last_error_class      text,
    last_error_at         timestamptz,
    disabled_fingerprint  text,
    disabled_status       integer,
    disabled_at           timestamptz,
    PRIMARY KEY (model, deployment)
);

-- Requests and tokens sent to each deployment per minute, counted by every
-- instance together, for its `rpm` and `tpm` limits. Rows older than the
-- current minute are deleted by the counters' expiry.
CREATE TABLE model_deployment_minutes (
    model       text NOT NULL,
    deployment  text NOT NULL,
    minute      timestamptz NOT NULL,
    requests    integer NOT NULL DEFAULT 0,
    tokens      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (model, deployment, minute)
);
