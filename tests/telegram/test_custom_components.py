"""A custom component on Telegram: a photo whose pixels hold the app's product photo, or a PDF that does.

The app is ``examples/product_card``. A component whose template fails goes as its text form in
a message, and the failure is logged once.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from channels.telegram import TELEGRAM_CAPABILITIES
from gateway import Settings
from tools import UiCapabilities

from ..custom_components import ENOUGH_MUG, PRODUCT, broken_app, broken_lines, mug_pixels, pdf_mug_pixels
from .conftest import FAST_PUSH, SECRET, MakeGateway
from .updates import ALICE_ID, message


def _runtime(app):  # type: ignore[no-untyped-def]
    return app.runtime(Settings(_env_file=None, secret=SECRET))  # type: ignore[call-arg]


async def test_the_product_card_is_a_photo_with_the_photo_in_it(make_gateway: MakeGateway) -> None:
    push = replace(FAST_PUSH, capabilities=TELEGRAM_CAPABILITIES)
    gw = await make_gateway(_runtime(PRODUCT.gateway), app=PRODUCT.gateway, push=push)
    await gw.send(message("show me the mug"))
    await gw.bot.wait_for(lambda b: "Here it is\\." in b.texts(), timeout=60)
    await gw.settle()
    [photo] = gw.bot.of("sendPhoto")
    assert photo.form == {
        "chat_id": str(ALICE_ID),
        "caption": "*Lisbon tile mug* · New\n€14\\.50",
        "parse_mode": "MarkdownV2",
    }
    upload = photo.files["photo"]
    assert upload.content_type == "image/png" and mug_pixels(upload.data) > ENOUGH_MUG


async def test_a_client_that_takes_documents_gets_a_pdf_with_the_photo_in_it(make_gateway: MakeGateway) -> None:
    push = replace(FAST_PUSH, capabilities=UiCapabilities(formats=["pdf", "text"]))
    gw = await make_gateway(_runtime(PRODUCT.gateway), app=PRODUCT.gateway, push=push)
    await gw.send(message("show me the teapot"))
    await gw.bot.wait_for(lambda b: "Here it is\\." in b.texts(), timeout=60)
    await gw.settle()
    [document] = gw.bot.of("sendDocument")
    upload = document.files["document"]
    assert upload.content_type == "application/pdf" and (upload.filename or "").endswith(".pdf")
    assert pdf_mug_pixels(upload.data) > ENOUGH_MUG


async def test_a_failing_template_is_a_text_message_and_one_log_line(
    make_gateway: MakeGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    push = replace(FAST_PUSH, capabilities=TELEGRAM_CAPABILITIES)
    app = broken_app()
    gw = await make_gateway(_runtime(app), app=app, push=push)
    for turn in range(1, 3):
        await gw.send(message("RaisingCard"))
        await gw.bot.wait_for(lambda b, n=turn: b.texts().count("Shown\\.") == n, timeout=30)
    await gw.settle()
    assert gw.bot.texts().count("Card x \\(as text\\)") == 2
    assert not gw.bot.of("sendPhoto") and not gw.bot.of("sendDocument")
    [line] = broken_lines(caplog.records, "RaisingCard")
    assert line.exc_info is None and "ZeroDivisionError" in line.getMessage()
