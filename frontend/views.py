from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from jobs.models import ContainerImage, Job


@login_required
def home(request):
    images = ContainerImage.objects.offered().prefetch_related("tags")
    jobs = Job.objects.for_user(request.user).select_related("image")[:20]
    return render(request, "frontend/home.html", {"images": images, "jobs": jobs})
