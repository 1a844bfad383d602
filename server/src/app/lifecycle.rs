//! The rules of the membership lifecycle (suspending, reactivating,
//! removing a member, leaving, transferring ownership).
//!
//! Every change runs through `membership_lifecycle`, which reads the
//! caller's and the target's memberships under the organization's lock and
//! lets the rules below refuse before it writes: the rules see the state
//! the change is made to, so two changes at once cannot both pass the
//! last-owner rule. The trigger on `memberships` tells the member's
//! streams on every instance (see `app::streams::MemberWatch`).

use crate::authz::OrgAccess;
use crate::db::datastore::organizations::{Lifecycle, LockedMember};
use crate::db::enums as db;
use crate::error::Error;

/// The caller, re-read under the lock: still an active member (their
/// access was checked before the lock; it may have ended meanwhile).
pub fn locked_actor(seen: &Lifecycle) -> Result<&LockedMember, Error> {
    seen.actor
        .as_ref()
        .filter(|a| a.status == db::MembershipStatus::Active)
        .ok_or_else(|| Error::forbidden("you are no longer an active member of this organization"))
}

/// The membership being changed: `404` for none and for a removed one.
pub fn locked_target(seen: &Lifecycle) -> Result<&LockedMember, Error> {
    seen.target
        .as_ref()
        .filter(|t| t.status != db::MembershipStatus::Deleted)
        .ok_or(Error::NotFound { what: "member" })
}

/// `409 last_owner` when `target` is the organization's only active owner.
pub fn not_last_owner(seen: &Lifecycle, target: &LockedMember) -> Result<(), Error> {
    if target.is_owner() && target.status == db::MembershipStatus::Active && seen.active_owners <= 1
    {
        return Err(Error::conflict(
            "last_owner",
            "this is the organization's last owner: transfer the ownership first \
             (POST /api/org/transfer_ownership)",
        ));
    }
    Ok(())
}

/// Owners act on anyone; anybody else only on members whose role ranks
/// strictly below their own (never on owners).
pub fn may_act_on(actor: &LockedMember, target: &LockedMember) -> Result<(), Error> {
    if actor.is_owner() || (!target.is_owner() && target.role_level < actor.role_level) {
        return Ok(());
    }
    Err(Error::Forbidden {
        code: "member_level_too_high",
        message: "you can only act on members whose role ranks below your own".to_string(),
    })
}

/// The rules of suspending or removing (`what`) a member: the last owner
/// never (`409 last_owner`, also when they target themself), nobody
/// themself (`400 cannot_target_self`), and only members the caller
/// outranks (`403 member_level_too_high`).
pub fn may_act_on_other(
    access: &OrgAccess,
    seen: &Lifecycle,
    actor: &LockedMember,
    target: &LockedMember,
    what: &str,
) -> Result<(), Error> {
    if target.user_id == access.user_id() {
        not_last_owner(seen, target)?;
        return Err(Error::invalid(
            "cannot_target_self",
            format!("you cannot {what} yourself; to leave, use POST /api/org/leave"),
        ));
    }
    may_act_on(actor, target)?;
    not_last_owner(seen, target)
}
