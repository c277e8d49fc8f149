"""The deliveries a forge sent: each recorded once, a second one refused as a duplicate."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.store.jobs.inserts import insert_or_skip
from bot.store.tables import Delivery, utcnow


class DuplicateDelivery(Exception):
    """A delivery id or signed body the forge sent before."""


class Deliveries:
    """JobStore's deliveries (a mixin: every method takes the caller's session)."""

    def record_delivery(
        self,
        session: Session,
        *,
        forge: str,
        delivery_id: str,
        event: str,
        key: str | None,
        outcome: str,
        reason: str | None = None,
        job_id: str | None = None,
        body_sha256: str | None = None,
    ) -> None:
        """Insert the delivery, or raise DuplicateDelivery if this forge already delivered
        that id, or the same signed body under another id (a replay). The caller rolls its
        transaction back then: nothing decided for a duplicate may be kept."""
        inserted = insert_or_skip(
            session,
            Delivery.__table__,  # type: ignore[arg-type]
            dict(
                forge=forge,
                delivery_id=delivery_id,
                event=event,
                key=key,
                outcome=outcome,
                reason=reason,
                job_id=job_id,
                body_sha256=body_sha256,
                received_at=utcnow(),
            ),
        )
        if not inserted:
            raise DuplicateDelivery(f"{forge} delivery {delivery_id}")

    def delivery_seen(self, session: Session, forge: str, delivery_id: str) -> bool:
        return (
            session.scalar(
                select(func.count())
                .select_from(Delivery)
                .where(Delivery.forge == forge, Delivery.delivery_id == delivery_id)
            )
            or 0
        ) > 0
