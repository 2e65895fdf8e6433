# nvcre-manager image: the controller manager (and nvcrectl) on a slim Python base.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# The wheel carries nvcre's chart (src/nvcre/setup/charts/nvcre links to charts/nvcre).
COPY charts ./charts
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --uid 65532 --no-create-home nvcre
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532
ENTRYPOINT ["nvcre-manager"]
