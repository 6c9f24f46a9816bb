"""A starter app: serve it with `agora-gateway serve --app starter_app:gateway`.

Change the tools in tools.py, and the agent's instructions and the branding below.
"""

from gateway import Agent, Branding, Gateway

from .tools import CancelOrder, GetOrder

gateway = Gateway(
    tools=[GetOrder, CancelOrder],
    agents=[
        Agent(
            name="support",
            description="Answers questions about orders.",
            instructions=(
                "You are the support assistant of a small shop. Look orders up with get_order before "
                "answering; never guess an order's status. Cancelling waits for the customer's approval: "
                "call cancel_order and let the approval card speak for itself. Keep answers short."
            ),
        )
    ],
    # model="openai:gpt-4o-mini",  # or AGORA_MODEL; without one, the offline demo model follows rules
    branding=Branding(
        name="Shop support",
        welcome="Hi! Ask me about an order, e.g. its status, or to cancel it.",
        prompts=["show order 1001", "cancel order 1002"],
        accent="#0f766e",
    ),
)
