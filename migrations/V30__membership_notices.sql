-- Membership lifecycle (suspend, reactivate, remove, leave, transfer of
-- ownership): every change to an active membership is announced with
-- NOTIFY membership_changed '<organization_id>:<user_id>', sent at the
-- commit of the transaction that made it, whatever statement made it
-- (the lifecycle operations, a role change, a deleted organization or
-- account cascading to its memberships). Each instance's listener
-- (chat_hub) routes it to the member's streams and WebSocket in that
-- organization, which re-read the membership and end when it is no
-- longer active.

CREATE FUNCTION membership_changed_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('membership_changed', OLD.organization_id || ':' || OLD.user_id);
    RETURN NULL;
END;
$$;

CREATE TRIGGER memberships_changed_update
    AFTER UPDATE OF status, role_id ON memberships
    FOR EACH ROW
    WHEN (OLD.status = 'active'
          AND (NEW.status IS DISTINCT FROM OLD.status OR NEW.role_id IS DISTINCT FROM OLD.role_id))
    EXECUTE FUNCTION membership_changed_notify();

CREATE TRIGGER memberships_changed_delete
    AFTER DELETE ON memberships
    FOR EACH ROW
    WHEN (OLD.status = 'active')
    EXECUTE FUNCTION membership_changed_notify();
