from pydantic import BaseModel

import tools


class CityInput(BaseModel):
    city: str


def test_ai_tool_builds_a_tool() -> None:
    @tools.ai_tool(description="Weather", input=CityInput)
    class GetWeatherTool:
        async def execute(self, input: CityInput, ctx: tools.ToolContext) -> dict[str, str]:
            return {"city": input.city}

    tool = tools.as_tool(GetWeatherTool)
    assert tool.name == "get_weather"
    assert tool.parameters["properties"]["city"]["type"] == "string"
